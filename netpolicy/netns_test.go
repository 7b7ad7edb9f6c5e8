package netpolicy

// Tier: root (netns).
//
// Helpers for the kernel tests: a fresh network namespace per test, root
// listeners inside it, and probes from processes running as a given uid
// inside it. Nothing here sends a packet outside that namespace.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/internal/tier"
)

// requireRoot applies the tier rule: in CI a skipped kernel test would be
// a silently missing proof.
func requireRoot(t *testing.T) {
	t.Helper()
	tier.RequireNeeds(t, "root (netns)",
		tier.Root("creates a network namespace and nftables tables in it"),
		tier.Program("ip", "iproute2"), tier.Program("nft", "nftables"))
}

type netNS struct {
	name string
	fd   int // open /run/netns/NAME, for netlink and setns
	exe  string
}

// newNetNS creates flock-np-<pid>-<n> with lo up and unprivileged ping
// sockets allowed (for the ICMP probe), and deletes it when the test ends.
func newNetNS(t *testing.T) *netNS {
	t.Helper()
	name := fmt.Sprintf("flock-np-%d-%d", os.Getpid(), nsSeq.next())
	mustRun(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	mustRun(t, "ip", "-n", name, "link", "set", "lo", "up")
	mustRun(t, "ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647")
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // runs before the delete above
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &netNS{name: name, fd: int(f.Fd()), exe: exe}
}

var nsSeq counter

type counter struct{ n int }

func (c *counter) next() int { c.n++; return c.n }

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nft runs the nft CLI inside the namespace.
func (ns *netNS) nft(t *testing.T, args ...string) string {
	t.Helper()
	return mustRun(t, "ip", append([]string{"netns", "exec", ns.name, "nft"}, args...)...)
}

// nftScript feeds a ruleset file to nft inside the namespace.
func (ns *netNS) nftScript(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s\n%s", err, out, script)
	}
}

// do runs f on an OS thread moved into the namespace; sockets f creates
// stay there. The thread is moved back afterwards (or, if that fails,
// left locked so the runtime retires it).
func (ns *netNS) do(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// serveTCP listens as root on addr in the namespace and greets every
// connection with "hello\n".
func (ns *netNS) serveTCP(t *testing.T, addr string) {
	t.Helper()
	go serveBanner(ns.listenTCP(t, addr))
}

// listenTCP listens as root on addr in the namespace until the test ends.
func (ns *netNS) listenTCP(t *testing.T, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	var err error
	ns.do(t, func() { l, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serveUDP echoes datagrams as root on addr in the namespace.
func (ns *netNS) serveUDP(t *testing.T, addr string) {
	t.Helper()
	var pc net.PacketConn
	var err error
	ns.do(t, func() { pc, err = net.ListenPacket("udp", addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// probe runs one helper attempt as uid inside the namespace.
func (ns *netNS) probe(t *testing.T, uid int, mode, network, addr string) probeResult {
	t.Helper()
	return ns.probeN(t, uid, mode, network, addr, 1)
}

// probeN is probe with a count, for the flood mode.
func (ns *netNS) probeN(t *testing.T, uid int, mode, network, addr string, n int) probeResult {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.name, ns.exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, fmt.Sprintf("NP_UID=%d", uid), "NP_NET="+network, "NP_ADDR="+addr, fmt.Sprintf("NP_COUNT=%d", n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s %s %s as uid %d: %v\n%s", mode, network, addr, uid, err, stderr.String())
	}
	var r probeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	return r
}

// refusedErrnos are the fast, explicit failures a rejected packet causes:
// ECONNREFUSED from the tcp reset, EPERM from the output hook dropping a
// datagram at send time, the unreachable errors from the icmpx answer.
var refusedErrnos = []string{"ECONNREFUSED", "EPERM", "EACCES", "EHOSTUNREACH", "ENETUNREACH"}

func (ns *netNS) expectOK(t *testing.T, who string, uid int, mode, network, addr string) {
	t.Helper()
	if r := ns.probe(t, uid, mode, network, addr); !r.OK {
		t.Errorf("%s (uid %d) %s %s %s: want success, got %s (%s) after %d ms", who, uid, mode, network, addr, r.Errno, r.Err, r.MS)
	}
}

func (ns *netNS) expectRefused(t *testing.T, who string, uid int, mode, network, addr string) probeResult {
	t.Helper()
	r := ns.probe(t, uid, mode, network, addr)
	switch {
	case r.OK:
		t.Errorf("%s (uid %d) %s %s %s: got through, want refused", who, uid, mode, network, addr)
	case !slices.Contains(refusedErrnos, r.Errno):
		t.Errorf("%s (uid %d) %s %s %s: failed with %q (%s), want one of %v", who, uid, mode, network, addr, r.Errno, r.Err, refusedErrnos)
	case r.MS >= 1000:
		t.Errorf("%s (uid %d) %s %s %s: refused only after %d ms, want < 1 s", who, uid, mode, network, addr, r.MS)
	default:
		t.Logf("%s (uid %d) %s %s %s: refused with %s in %d ms", who, uid, mode, network, addr, r.Errno, r.MS)
	}
	return r
}

// agentListener starts a helper listening on addr as uid, until the test ends.
func (ns *netNS) agentListener(t *testing.T, uid int, addr string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.name, ns.exe)
	cmd.Env = append(os.Environ(), helperEnv+"=listen", fmt.Sprintf("NP_UID=%d", uid), "NP_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("agent listener on %s: %q", addr, line)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("agent listener on %s: not ready after 5 s", addr)
	}
}

// poll retries cond until it holds or the deadline passes.
func poll(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, d, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
