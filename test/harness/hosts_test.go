// Tier: root + nspawn, with a private network and sshd (HostsTier).

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHosts boots two machines on a private network and checks what a
// multi-host test relies on: each has its address and only it, the
// controller reaches both with ssh, one reaches the other, a cut between
// them holds and heals, a machine
// powered off is down for as long as the test wants and comes back with
// the same address and host key, and Close leaves no namespace behind.
func TestHosts(t *testing.T) {
	hostIfs := netIfs(t)
	h := BootHosts(t, []string{"a", "b"}, Options{NoBinaries: true})
	a, b := h.Machine("a"), h.Machine("b")
	ssh := func(host string, argv ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
		defer cancel()
		out, errOut, err := h.SSH(ctx, host, argv...)
		if err != nil {
			return out, fmt.Errorf("%w: %s", err, errOut)
		}
		return out, nil
	}

	t.Run("each machine has its address on eth0", func(t *testing.T) {
		for _, name := range h.Names() {
			out := mustRun(t, h.Machine(name), "ip", "-4", "-o", "addr", "show", "dev", "eth0")
			if want := " " + h.Addr(name).String() + "/24 "; !strings.Contains(out, want) {
				t.Errorf("host %s: eth0 %q, want%s", name, out, want)
			}
		}
	})

	t.Run("the controller logs in with the test's key", func(t *testing.T) {
		for _, name := range h.Names() {
			// A quote, a space and a $ reach the command as given.
			out, err := ssh(name, "sh", "-c", `echo "$(hostname) $1"`, "sh", "it's $HOME")
			if want := h.Machine(name).Name() + " it's $HOME\n"; err != nil || out != want {
				t.Errorf("ssh %s: %q, %v; want %q", name, out, err, want)
			}
		}
	})

	t.Run("root over ssh administers its machine's network", func(t *testing.T) {
		// nft as flockctl provision runs it: CAP_NET_ADMIN in the
		// machine's own namespace, as --private-network would give.
		if out, err := ssh("a", "sh", "-c", "nft add table inet harness-test && nft list tables && nft delete table inet harness-test"); err != nil || !strings.Contains(out, "table inet harness-test") {
			t.Errorf("nft over ssh: %q, %v", out, err)
		}
	})

	t.Run("a machine reaches the other over ssh", func(t *testing.T) {
		sshFrom(t, h, a, "b", b.Name())
	})

	t.Run("nothing but the key logs in", func(t *testing.T) {
		other, err := NewSSHKey(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
		defer cancel()
		args := append(sshOptions(other.File, h.KnownHosts), h.Addr("a").String(), "true")
		if out, err := h.Net.Command(ctx, append([]string{"ssh"}, args...)...).CombinedOutput(); err == nil {
			t.Errorf("another key logged in to a: %s", out)
		}
	})

	t.Run("a cut stops the two hosts reaching each other, not the controller; heal undoes it", func(t *testing.T) {
		reach := func() error {
			_, errOut, err := a.Run(context.Background(), "timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+h.Addr("b").String()+"/22")
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			return nil
		}
		if err := h.Net.Split([]string{"a"}, []string{"b"}); err != nil {
			t.Fatal(err)
		}
		if err := reach(); err == nil {
			t.Errorf("a reached b's port 22 across the cut")
		}
		for _, name := range h.Names() {
			if _, err := ssh(name, "true"); err != nil {
				t.Errorf("the controller lost host %s to the cut: %v", name, err)
			}
		}
		if err := h.Net.Heal(); err != nil {
			t.Fatal(err)
		}
		if err := reach(); err != nil {
			t.Errorf("a does not reach b after the heal: %v", err)
		}
		if err := h.Net.Heal(); err != nil {
			t.Errorf("a second heal: %v", err)
		}
		if err := h.Net.Cut([2]string{"a", "x"}); err == nil {
			t.Errorf("a cut to a host not on the net succeeded")
		}
	})

	t.Run("a machine powered off stays down and comes back the same host", func(t *testing.T) {
		if err := b.PowerOff(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Run(context.Background(), "true"); err == nil {
			t.Errorf("Run on a machine powered off succeeded")
		}
		t0 := time.Now()
		if out, err := ssh("b", "true"); err == nil {
			t.Errorf("ssh to b while it is off succeeded: %s", out)
		} else {
			t.Logf("ssh to b while off: refused in %v: %v", time.Since(t0).Round(time.Millisecond), err)
		}
		if err := b.PowerOn(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := b.PowerOn(context.Background()); err == nil {
			t.Errorf("a second PowerOn succeeded")
		}
		// The pinned host key (StrictHostKeyChecking) and the address
		// are the same.
		if out, err := ssh("b", "hostname"); err != nil || strings.TrimSpace(out) != b.Name() {
			t.Errorf("ssh b after power on: %q, %v", out, err)
		}
		sshFrom(t, h, a, "b", b.Name())
	})

	t.Run("close leaves no namespace or interface", func(t *testing.T) {
		ns := []string{h.Net.Name(), h.Net.Name() + "-a", h.Net.Name() + "-b"}
		for _, n := range ns {
			if _, err := os.Stat(filepath.Join(netnsDir, n)); err != nil {
				t.Fatalf("namespace %s before close: %v", n, err)
			}
		}
		for _, name := range h.Names() {
			if err := h.Machine(name).Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Net.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if _, err := os.Lstat(filepath.Join(netnsDir, n)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s after Close: %v", n, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(parentDir, h.Net.Name())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the net's directory after Close: %v", err)
		}
		if got := netIfs(t); got != hostIfs {
			t.Errorf("the host's interfaces changed: %s, were %s", got, hostIfs)
		}
	})
}

// sshFrom has machine from ssh to host (given the test's key and the
// pinned host keys) and checks it answers with its hostname.
func sshFrom(t *testing.T, h *Hosts, from *Machine, host, want string) {
	t.Helper()
	key, err := os.ReadFile(h.Key.File)
	if err != nil {
		t.Fatal(err)
	}
	known, err := os.ReadFile(h.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, from, "mkdir", "-p", "-m", "0700", "/root/.ssh")
	for p, b := range map[string][]byte{"/root/.ssh/test_key": key, "/root/.ssh/test_known_hosts": known} {
		if err := from.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun(t, from, "ssh", "-F", "/dev/null", "-T", "-i", "/root/.ssh/test_key", "-o", "IdentitiesOnly=yes",
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/root/.ssh/test_known_hosts",
		"-o", "ConnectTimeout=10", "root@"+h.Addr(host).String(), "hostname")
	if strings.TrimSpace(out) != want {
		t.Errorf("ssh from %s to %s: %q, want %q", from.Name(), host, out, want)
	}
}

// netIfs lists the host's network interfaces.
func netIfs(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestStaleNetSwept fakes the namespaces of a run that crashed (a net and
// a machine's on it, no directory) and checks the next NewNet removes
// them, and leaves a live net's alone.
func TestStaleNetSwept(t *testing.T) {
	requireNspawn(t)
	HostsTier.Require(t)
	dead := deadProc(t)
	stale := []string{fmt.Sprintf("%s%d-1", netPrefix, dead.pid), fmt.Sprintf("%s%d-1-a", netPrefix, dead.pid)}
	for _, n := range stale {
		if out, err := exec.Command("ip", "netns", "add", n).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", n, err, out)
		}
		t.Cleanup(func() { _ = delNetns(n) })
	}
	live, err := NewNet(TestLog(t))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.Attach("x", NetFirst); err != nil {
		t.Fatal(err)
	}
	for _, n := range stale {
		if _, err := os.Lstat(filepath.Join(netnsDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale namespace %s not removed: %v", n, err)
		}
	}
	// A second net's sweep spares the first, which lives.
	other, err := NewNet(TestLog(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, n := range []string{live.Name(), live.Name() + "-x"} {
		if _, err := os.Stat(filepath.Join(netnsDir, n)); err != nil {
			t.Errorf("live namespace %s swept: %v", n, err)
		}
	}
	if _, err := live.Attach("y", NetFirst); err == nil {
		t.Errorf("a second host got the address %s", NetFirst)
	}
}
