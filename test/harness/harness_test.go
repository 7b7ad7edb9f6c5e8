// Tier: root + nspawn.

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// cmdWait bounds any one command in the machine or VM (an ssh round trip
// to an emulated guest).
const cmdWait = 2 * time.Minute

func mustRun(t *testing.T, b booted, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
	defer cancel()
	out, errOut, err := b.Run(ctx, argv...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	return out
}

// TestMachine boots one machine without the project's binaries and checks
// each promise of the harness on it, reboot and teardown included.
func TestMachine(t *testing.T) {
	t0 := time.Now()
	m := BootWith(t, Options{NoBinaries: true})
	t.Logf("Boot returned in %v", time.Since(t0).Round(time.Millisecond))

	t.Run("system is running", func(t *testing.T) {
		state := strings.TrimSpace(mustRun(t, m, "systemctl", "is-system-running"))
		if state != "running" && state != "degraded" {
			t.Fatalf("systemctl is-system-running: %q", state)
		}
		if got := strings.TrimSpace(mustRun(t, m, "hostname")); got != m.Name() {
			t.Errorf("hostname %q, want the machine name %q", got, m.Name())
		}
	})

	t.Run("masked units stay down", func(t *testing.T) {
		for _, u := range []string{"postgresql.service", "cron.service", "getty@tty1.service", "apt-daily.timer"} {
			out, _, _ := m.Run(context.Background(), "systemctl", "is-enabled", u)
			if s := strings.TrimSpace(out); s != "masked" && s != "" {
				t.Errorf("%s is %q, want masked", u, s)
			}
		}
	})

	t.Run("transient unit runs", func(t *testing.T) {
		mustRun(t, m, "systemd-run", "--wait", "--quiet", "-p", "User=nobody", "/bin/true")
		// and a failing one reports its failure, with exit status and argv
		ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
		defer cancel()
		_, _, err := m.Run(ctx, "systemd-run", "--wait", "--quiet", "-p", "User=nobody", "/bin/false")
		var re *RunError
		if !errors.As(err, &re) || re.ExitCode == 0 || !strings.Contains(err.Error(), "/bin/false") {
			t.Errorf("systemd-run /bin/false: err %v, want a *RunError naming the argv with a non-zero exit", err)
		}
	})

	t.Run("private network has only lo", func(t *testing.T) {
		out := mustRun(t, m, "ls", "/sys/class/net")
		if f := strings.Fields(out); len(f) != 1 || f[0] != "lo" {
			t.Errorf("interfaces in the machine: %q, want only lo", f)
		}
	})

	t.Run("run error says argv, status and stderr", func(t *testing.T) {
		_, _, err := m.Run(context.Background(), "sh", "-c", "echo oops >&2; exit 3")
		var re *RunError
		if !errors.As(err, &re) || re.ExitCode != 3 || !strings.Contains(err.Error(), "oops") ||
			!strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "sh -c") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("run is bounded by ctx and leaves nothing", func(t *testing.T) {
		for _, argv := range [][]string{
			{"sleep", "1000"},
			{"sh", "-c", "sleep 1001; true"}, // a child of the child
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t1 := time.Now()
			_, _, err := m.Run(ctx, argv...)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%q: err = %v, want DeadlineExceeded", argv, err)
			}
			if d := time.Since(t1); d > 5*time.Second {
				t.Errorf("%q: Run took %v after a 300 ms deadline", argv, d)
			}
		}
		// Not even a zombie: one would hold the machine's shutdown up.
		m.Eventually(t, 5*time.Second, func() error {
			out := mustRun(t, m, "ps", "-eo", "pid=,ppid=,stat=,comm=")
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) == 4 && (f[3] == "sleep" || f[3] == "sh") {
					return fmt.Errorf("left in the machine: %s", l)
				}
			}
			return nil
		})
	})

	t.Run("run has a clean environment", func(t *testing.T) {
		t.Setenv("FLOCK_HARNESS_LEAK", "1")
		out := mustRun(t, m, "env")
		if strings.Contains(out, "FLOCK_HARNESS_LEAK") || !strings.Contains(out, "HOME=/root") {
			t.Errorf("env in the machine:\n%s", out)
		}
	})

	t.Run("files round-trip", func(t *testing.T) {
		data := []byte("written from the host\n")
		if err := m.WriteFile("/root/harness-file", data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := m.ReadFile("/root/harness-file")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadFile = %q, %v; want %q", got, err, data)
		}
		if mode := strings.TrimSpace(mustRun(t, m, "stat", "-c", "%a %U", "/root/harness-file")); mode != "600 root" {
			t.Errorf("inside, the file is %q, want 600 root", mode)
		}
		// /run is a tmpfs of the machine's own: seen through its root.
		if err := m.WriteFile("/run/harness-tmpfs", []byte("tmpfs"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := mustRun(t, m, "cat", "/run/harness-tmpfs"); out != "tmpfs" {
			t.Errorf("inside, /run/harness-tmpfs = %q", out)
		}
		mustRun(t, m, "sh", "-c", "echo from inside > /run/harness-inside")
		if got, err := m.ReadFile("/run/harness-inside"); err != nil || string(got) != "from inside\n" {
			t.Errorf("ReadFile(/run/harness-inside) = %q, %v", got, err)
		}
		// Nothing of it reached the host.
		for _, p := range []string{"/root/harness-file", "/run/harness-tmpfs", "/run/harness-inside"} {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("host has %s (%v)", p, err)
			}
		}
		// A symlink inside the machine resolves inside it.
		mustRun(t, m, "ln", "-sf", "/run/harness-inside", "/root/harness-link")
		if got, err := m.ReadFile("/root/harness-link"); err != nil || string(got) != "from inside\n" {
			t.Errorf("ReadFile through an absolute symlink = %q, %v", got, err)
		}
		if _, err := m.ReadFile("/no/such/file"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadFile of a missing file: %v, want ErrNotExist", err)
		}
	})

	t.Run("reboot keeps /var/lib", func(t *testing.T) {
		mustRun(t, m, "mkdir", "-p", "/var/lib/harness")
		if err := m.WriteFile("/var/lib/harness/state", []byte("survives"), 0o644); err != nil {
			t.Fatal(err)
		}
		bootID := mustRun(t, m, "cat", "/proc/sys/kernel/random/boot_id")
		pid := m.PID()
		t1 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := m.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("Reboot took %v", time.Since(t1).Round(time.Millisecond))
		if m.PID() == pid || m.PID() == 0 {
			t.Errorf("systemd pid %d after reboot, was %d", m.PID(), pid)
		}
		if id := mustRun(t, m, "cat", "/proc/sys/kernel/random/boot_id"); id == bootID {
			t.Errorf("boot id unchanged by reboot: %s", id)
		}
		state := strings.TrimSpace(mustRun(t, m, "systemctl", "is-system-running"))
		if state != "running" && state != "degraded" {
			t.Errorf("after reboot: systemctl is-system-running: %q", state)
		}
		// The first boot's journal is still there: the machine was shut
		// down in order and its disk kept.
		if boots := strings.Fields(strings.TrimSpace(mustRun(t, m, "journalctl", "--list-boots", "--no-pager", "-q"))); len(boots) < 2*4 {
			t.Errorf("journalctl --list-boots after reboot: %q, want two boots", boots)
		}
		if c := m.ConsoleTail(200); !strings.Contains(c, "Halting system") {
			t.Errorf("console shows no orderly halt before the reboot:\n%s", c)
		}
		if got, err := m.ReadFile("/var/lib/harness/state"); err != nil || string(got) != "survives" {
			t.Errorf("/var/lib/harness/state after reboot = %q, %v", got, err)
		}
		if _, err := m.ReadFile("/run/harness-tmpfs"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("/run/harness-tmpfs survived the reboot (%v): /run is no tmpfs?", err)
		}
		mustRun(t, m, "systemd-run", "--wait", "--quiet", "-p", "User=nobody", "/bin/true")
	})

	t.Run("close leaves nothing", func(t *testing.T) {
		dir, pid := m.Dir(), m.PID()
		nspawn := m.cur.id
		t1 := time.Now()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("Close took %v", time.Since(t1).Round(time.Millisecond))
		if err := m.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if mps, err := mountsUnder(dir); err != nil || len(mps) > 0 {
			t.Errorf("still mounted after Close: %v (%v)", mps, err)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Close: %v", dir, err)
		}
		for _, p := range []procID{nspawn, {pid: pid}} {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.pid)); err == nil && (p.start == 0 || p.alive()) {
				t.Errorf("pid %d (%s) still there after Close", p.pid, comm(p.pid))
			}
		}
		if _, _, err := m.Run(context.Background(), "true"); err == nil {
			t.Errorf("Run after Close succeeded")
		}
		if _, err := m.ReadFile("/etc/hostname"); err == nil {
			t.Errorf("ReadFile after Close succeeded")
		}
	})
}

// TestTwoMachines checks that machines run side by side, each with its own
// name, network and files.
func TestTwoMachines(t *testing.T) {
	a := BootWith(t, Options{NoBinaries: true})
	b := BootWith(t, Options{NoBinaries: true})
	if a.Name() == b.Name() || a.PID() == b.PID() {
		t.Fatalf("two machines share name %s / pid %d", a.Name(), a.PID())
	}
	if err := a.WriteFile("/root/who", []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFile("/root/who"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("machine b sees a's file: %v", err)
	}
	// Each has a network namespace of its own, neither the host's.
	self, _ := os.Readlink("/proc/self/ns/net")
	na, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", a.PID()))
	nb, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", b.PID()))
	if na == "" || na == nb || na == self || nb == self {
		t.Errorf("network namespaces: host %s, a %s, b %s", self, na, nb)
	}
	// Each has cgroups of its own: sharing the caller's, two machines'
	// systemds would manage one tree (flock-agent@1.service in both).
	ca, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", a.PID()))
	cb, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", b.PID()))
	if !strings.Contains(string(ca), "/flock-harness/"+a.Name()) || !strings.Contains(string(cb), "/flock-harness/"+b.Name()) {
		t.Errorf("machines share cgroups: a's systemd in\n%s\nb's in\n%s", ca, cb)
	}
}

// TestStaleDirSwept fakes the dir of a run that crashed (dead owner, dead
// nspawn, overlay still mounted) and checks the next Start removes it.
func TestStaleDirSwept(t *testing.T) {
	requireNspawn(t)
	dir := fmt.Sprintf("%s/stale-harness-test-%d", parentDir, os.Getpid())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A PID that is certainly gone: a child we started and reaped.
	dead := deadProc(t)
	for _, f := range []string{ownerFile, nspawnFile} {
		if err := os.WriteFile(dir+"/"+f, []byte(dead.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := mountRoot(dir); err != nil {
		t.Fatal(err)
	}
	BootWith(t, Options{NoBinaries: true})
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s not removed: %v", dir, err)
	}
	if mps, _ := mountsUnder(dir); len(mps) > 0 {
		t.Errorf("stale mounts left: %v", mps)
		for _, mp := range mps {
			_ = unmount(mp)
		}
	}
}

// TestNameTaken checks that a Start refused a name in use leaves the
// machine that has it alone.
func TestNameTaken(t *testing.T) {
	a := BootWith(t, Options{NoBinaries: true})
	if b, err := Start(context.Background(), Options{Name: a.Name(), NoBinaries: true}); err == nil {
		b.Close()
		t.Fatalf("a second machine named %s started", a.Name())
	} else {
		t.Logf("refused as it should: %v", err)
	}
	if _, err := os.Stat(a.Dir() + "/root/etc"); err != nil {
		t.Errorf("the refused Start harmed the first machine: %v", err)
	}
	mustRun(t, a, "true")
}

// TestLiveDirKept checks the sweep spares a dir whose owner still runs.
func TestLiveDirKept(t *testing.T) {
	requireNspawn(t)
	dir := fmt.Sprintf("%s/live-harness-test-%d", parentDir, os.Getpid())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := procOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/"+ownerFile, []byte(self.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, why := machineDirs.isStale(dir); stale {
		t.Errorf("live dir judged stale: %s", why)
	}
	dead := deadProc(t)
	if err := os.WriteFile(dir+"/"+ownerFile, []byte(dead.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, _ := machineDirs.isStale(dir); !stale {
		t.Errorf("dir of a dead owner judged live")
	}
}

// deadProc is the identity of a process that has exited and been reaped.
func deadProc(t *testing.T) procID {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	id := procID{pid: p.Pid, start: 1}
	if q, err := procOf(p.Pid); err == nil {
		id = q
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return id
}

// fakeTB records what the tier rule and Eventually do to a test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Fatal(a ...any)            { f.fatal = fmt.Sprint(a...) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.fatal = fmt.Sprintf(s, a...) }
func (f *fakeTB) Skip(a ...any)             { f.skip = fmt.Sprint(a...) }

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 5*time.Second, func() error {
		if n++; n < 3 {
			return fmt.Errorf("try %d", n)
		}
		return nil
	})
	f := &fakeTB{TB: t}
	t0 := time.Now()
	Eventually(f, 200*time.Millisecond, func() error { return errors.New("never") })
	if !strings.Contains(f.fatal, "never") || time.Since(t0) < 200*time.Millisecond {
		t.Errorf("timeout: fatal %q after %v", f.fatal, time.Since(t0))
	}
}
