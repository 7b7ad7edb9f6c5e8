package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVMHarness boots one VM with the project's binaries and checks each
// promise of the VM harness on it, reboot and teardown included.
// Tier: root + VM (qemu).
func TestVMHarness(t *testing.T) {
	t0 := time.Now()
	v := BootVM(t)
	t.Logf("BootVM returned in %v", time.Since(t0).Round(time.Millisecond))

	t.Run("systemd runs on full cgroup v2", func(t *testing.T) {
		if got := strings.TrimSpace(mustRun(t, v, "hostname")); got != v.Name() {
			t.Errorf("hostname %q, want the VM's name %q", got, v.Name())
		}
		if fs := strings.TrimSpace(mustRun(t, v, "stat", "-f", "-c", "%T", "/sys/fs/cgroup")); fs != "cgroup2fs" {
			t.Errorf("/sys/fs/cgroup is %s, want cgroup2fs", fs)
		}
		// Available to units; systemd enables each below the root when a
		// unit first asks for it (cpu with the first CPUQuota).
		ctl := mustRun(t, v, "cat", "/sys/fs/cgroup/cgroup.controllers")
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !strings.Contains(" "+strings.TrimSpace(ctl)+" ", " "+c+" ") {
				t.Errorf("controller %s not available: %q", c, ctl)
			}
		}
	})

	t.Run("arguments arrive as given", func(t *testing.T) {
		args := []string{"plain", "two words", `it's "quoted"`, "$HOME `id` $(id)", "new\nline", "", "*", `back\slash`}
		out := mustRun(t, v, append([]string{"printf", `%s\0`}, args...)...)
		if got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00"); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", args) {
			t.Errorf("argv arrived as %q, want %q", got, args)
		}
		if env := mustRun(t, v, "env"); strings.Contains(env, "SSH_") || !strings.Contains(env, "SYSTEMD_PAGER=") {
			t.Errorf("environment is not the clean one:\n%s", env)
		}
	})

	t.Run("a failure carries its exit status", func(t *testing.T) {
		_, _, err := v.Run(context.Background(), "sh", "-c", "echo oops >&2; exit 3")
		var re *RunError
		if !errors.As(err, &re) || re.ExitCode != 3 || !strings.Contains(err.Error(), "oops") {
			t.Errorf("got %v, want a RunError with exit status 3 and its stderr", err)
		}
	})

	t.Run("files round-trip", func(t *testing.T) {
		data := []byte("binary\x00\xff\nend")
		if err := v.WriteFile("/root/f", data, 0o640); err != nil {
			t.Fatal(err)
		}
		if got, err := v.ReadFile("/root/f"); err != nil || string(got) != string(data) {
			t.Errorf("ReadFile = %q, %v; want %q", got, err, data)
		}
		if m := strings.TrimSpace(mustRun(t, v, "stat", "-c", "%a", "/root/f")); m != "640" {
			t.Errorf("mode %s, want 640", m)
		}
		if _, err := v.ReadFile("/root/absent"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile of a missing file: %v, want fs.ErrNotExist", err)
		}
	})

	t.Run("project binaries are installed", func(t *testing.T) {
		for _, b := range []string{"flockctl", "flock-agent", "probe", "floor"} {
			mustRun(t, v, "test", "-x", "/usr/local/bin/"+b)
		}
		mustRun(t, v, "flockctl", "--help")
	})

	t.Run("the guest reaches nothing outside", func(t *testing.T) {
		// Without restrict=on, 10.0.2.2 is the host's loopback: a listener
		// there must hear nothing from the guest.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		heard := make(chan struct{}, 1)
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
				heard <- struct{}{}
			}
		}()
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		out, _, err := v.Run(context.Background(), "python3", "-c",
			"import socket,sys\ntry:\n socket.create_connection(('10.0.2.2',"+port+"),3); print('connected')\nexcept OSError as e: print(e)")
		if strings.Contains(out, "connected") || err != nil {
			t.Errorf("guest to the host's loopback through 10.0.2.2:%s: %q (%v)", port, out, err)
		}
		select {
		case <-heard:
			t.Errorf("the host's listener on 127.0.0.1:%s was reached from the guest", port)
		default:
		}
	})

	t.Run("SSH target works for other clients", func(t *testing.T) {
		s := v.SSH()
		cmd := exec.Command("ssh", "-F", "/dev/null", "-i", s.KeyFile, "-p", strconv.Itoa(s.Port),
			"-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+s.KnownHostsFile, "-o", "StrictHostKeyChecking=yes",
			s.User+"@"+s.Host, "id", "-u")
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "0" {
			t.Errorf("ssh with %+v: %v: %s", s, err, out)
		}
	})

	t.Run("reboot keeps the disk and drops tmpfs", func(t *testing.T) {
		before := mustRun(t, v, "cat", "/proc/sys/kernel/random/boot_id")
		if err := v.WriteFile("/root/marker", []byte("disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := v.WriteFile("/run/marker", []byte("tmpfs"), 0o644); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if err := v.Reboot(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("Reboot returned in %v", time.Since(t0).Round(time.Millisecond))
		if after := mustRun(t, v, "cat", "/proc/sys/kernel/random/boot_id"); after == before {
			t.Errorf("boot id unchanged: %s", after)
		}
		if b, err := v.ReadFile("/root/marker"); err != nil || string(b) != "disk" {
			t.Errorf("/root/marker after reboot: %q, %v", b, err)
		}
		if _, err := v.ReadFile("/run/marker"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("/run/marker survived the reboot: %v", err)
		}
	})

	t.Run("close removes the VM", func(t *testing.T) {
		pid := v.qemu().id
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if pid.alive() {
			t.Errorf("qemu pid %d still running", pid.pid)
		}
		if _, err := os.Stat(v.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists: %v", v.Dir(), err)
		}
		if _, _, err := v.Run(context.Background(), "true"); err == nil {
			t.Error("Run after Close succeeded")
		}
	})
}
