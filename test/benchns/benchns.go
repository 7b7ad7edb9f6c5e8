// Package benchns runs a benchmark as an agent's host runs its agents:
// with flock's firewall in force on loopback and each agent's sockets
// owned by its uid, so the kernel's per-agent rates (netpolicy) act on the
// flooders of the benchmark as they would on agents' units, and the
// flooders are held to the CPU their units would give them.
//
// The benchmark runs again in a network namespace of its own (the test
// binary, re-executed with CLONE_NEWNET: nothing leaves it, and the
// host's tables are never touched); the rows come from that run.
package benchns

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
)

const insideEnv = "FLOCK_BENCH_NETNS"

// Enter says whether the calling benchmark (named name) runs here. As
// root, outside: it runs the benchmark again in a new network namespace,
// its output copied to this one's, and answers false (the caller
// returns). Inside: it brings loopback up and answers true. Not root:
// true, and Firewalled stays false (the rows say so).
func Enter(b *testing.B, name string) bool {
	b.Helper()
	if os.Getenv(insideEnv) == "1" {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			b.Fatalf("ip link set lo up in the benchmark's namespace: %v: %s", err, out)
		}
		return true
	}
	if os.Geteuid() != 0 {
		return true
	}
	args := []string{"-test.run=^$", "-test.bench=^" + name + "$", "-test.benchtime=1x", "-test.timeout=2h"}
	// A profile of the run that measures, beside this one's (which the
	// test binary writes after it, of nothing).
	if f := flag.Lookup("test.cpuprofile"); f != nil && f.Value.String() != "" {
		args = append(args, "-test.cpuprofile="+f.Value.String()+".netns")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), insideEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s in a network namespace of its own: %v", name, err)
	}
	return false
}

// Firewalled says whether this run is the one inside the namespace, where
// Apply may put flock's table.
func Firewalled() bool { return os.Getenv(insideEnv) == "1" }

// Apply puts p in force in the benchmark's namespace (nothing outside it
// runs this: Firewalled is false there, and Apply then does nothing).
func Apply(b *testing.B, p netpolicy.Policy) {
	b.Helper()
	if !Firewalled() {
		return
	}
	if err := netpolicy.New().Ensure(context.Background(), p); err != nil {
		b.Fatalf("flock's firewall in the benchmark's namespace: %v", err)
	}
}

// UID is agent id's uid, as spec.Flock.UID gives it at the default base.
func UID(id int) uint32 { return spec.DefaultUIDBase + uint32(id) }

// DialAs connects as d would, from a socket owned by uid (firewalled runs
// only; else as this process): a socket takes the fsuid of the thread that
// makes it, set for the dial alone, so the process stays root.
func DialAs(uid uint32, d *net.Dialer, network, addr string) (net.Conn, error) {
	if !Firewalled() {
		return d.Dial(network, addr)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Setfsuid(int(uid)); err != nil {
		return nil, fmt.Errorf("setfsuid %d: %w", uid, err)
	}
	c, err := d.Dial(network, addr)
	if e := unix.Setfsuid(0); e != nil {
		// The thread must not make root's sockets as uid: keep it
		// locked, so the runtime retires it with this goroutine.
		runtime.LockOSThread()
	}
	return c, err
}

// Dialer is DialAs for nats.SetCustomDialer and the like.
type Dialer struct {
	UID uint32
	net.Dialer
}

func (d *Dialer) Dial(network, addr string) (net.Conn, error) {
	return DialAs(d.UID, &d.Dialer, network, addr)
}

// Throttle holds a flood to the CPU an agent's unit gives it by default
// (CPUQuota 50%: spec.DefaultCPUPercent): after each step, it waits as
// long as the step took. In one process with the services, a flood
// unbounded would take the cores no agent's unit lets it have. The
// floods of one agent share its unit's quota: give them the same Agent,
// and they step one at a time (each step and its wait holding it), so
// together they take no more than one flood alone; each then calls Stop.
type Throttle struct {
	Agent *sync.Mutex
	start time.Time
}

func (t *Throttle) Step() {
	t.Stop()
	if t.Agent != nil {
		t.Agent.Lock()
	}
	t.start = time.Now()
}

// Stop ends the step under way (its wait included) and lets the agent's
// other floods go on.
func (t *Throttle) Stop() {
	if t.start.IsZero() {
		return
	}
	busy := time.Since(t.start)
	time.Sleep(busy * (100 - spec.DefaultCPUPercent) / spec.DefaultCPUPercent)
	t.start = time.Time{}
	if t.Agent != nil {
		t.Agent.Unlock()
	}
}
