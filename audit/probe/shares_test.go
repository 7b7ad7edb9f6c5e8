package probe

// Tier: unit (no root): a real bus and a real proxy in this process, the
// floods run as an agent would (its environment), each beyond its share
// and within it.

import (
	"bytes"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
)

// sharedBus is a bus for orchestrator 1 (the flooder) and monitor 2 with
// small shares, and the environment of agent 1 for the ops; it returns
// the operator's seed file.
func sharedBus(t *testing.T) (*bus.Server, string) {
	t.Helper()
	dir := t.TempDir()
	keys := map[string]string{}
	seeds := map[string]string{}
	for _, n := range []string{"flock-1", "flock-2", creds.OperatorName} {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		keys[n], seeds[n] = pub, filepath.Join(dir, n+".nk")
		if err := os.WriteFile(seeds[n], seed, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	shares := spec.Shares{Connections: 2, Tasks: 3, TaskBytes: 1 << 20}
	f := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: -1, MaxSubscriptions: spec.MinMaxSubscriptions, MaxPending: spec.MinMaxPending},
		Agents: []spec.Agent{{ID: 1, Role: spec.RoleOrchestrator, Shares: shares}, {ID: 2, Role: spec.RoleMonitor, Shares: shares}}}
	s, err := bus.Start(bus.ForFlock(f, keys), bus.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	t.Setenv("NATS_URL", s.ClientURL())
	t.Setenv("NATS_NKEY", seeds["flock-1"])
	t.Setenv("NATS_INBOX_PREFIX", "_INBOX.flock-1")
	t.Setenv("AGENT_ID", "1")
	return s, seeds[creds.OperatorName]
}

// flood runs r and says whether it got beyond the share (OK), met its
// refusal (err), or proved nothing (TimedOut).
func flood(t *testing.T, r Request) Result {
	t.Helper()
	return Run(r, r.Within(20*time.Second))
}

func TestShareFloods(t *testing.T) {
	s, op := sharedBus(t)
	for _, tc := range []struct {
		name   string
		req    Request
		refuse string // "" within the share: OK
	}{
		{"connections within", Request{Op: "nats-connections", Count: 2}, ""},
		{"connections beyond", Request{Op: "nats-connections", Count: 3}, "connection 3 of 3 refused (2 held)"},
		{"subscriptions within", Request{Op: "nats-subscriptions", Name: "_INBOX.flock-1.x", Count: spec.MinMaxSubscriptions}, ""},
		{"subscriptions beyond", Request{Op: "nats-subscriptions", Name: "_INBOX.flock-1.x", Count: spec.MinMaxSubscriptions + 1}, "maximum subscriptions exceeded"},
		{"the largest message", Request{Op: "nats-oversize", Name: "agent.1.events", Size: spec.MaxMessage}, ""},
		{"a larger one", Request{Op: "nats-oversize", Name: "agent.1.events", Size: spec.MaxMessage + 1}, "Maximum Payload Violation"},
		{"tasks beyond", Request{Op: "desk-send", Name: "tasks.flock-audit.1", Count: 4, Size: 1000}, "task 4 of 4 refused (3 held): the bus's task desk refused (tasks)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := flood(t, tc.req)
			switch {
			case tc.refuse == "" && !r.OK:
				t.Fatalf("within the share: %s", r)
			case tc.refuse != "" && (r.OK || r.TimedOut || !strings.Contains(r.Err, tc.refuse)):
				t.Fatalf("beyond the share: %s (timed out %v), want refused with %q", r, r.TimedOut, tc.refuse)
			}
		})
	}
	// The operator, who has no share, holds more connections.
	if r := flood(t, Request{Op: "nats-connections", Count: 5, Addr: s.ClientURL(), Path: op}); !r.OK {
		t.Errorf("the operator's connections: %s", r)
	}
	// A flood refused at its first attempt proves nothing.
	if r := flood(t, Request{Op: "nats-connections", Count: 3, Addr: "nats://127.0.0.1:1"}); r.OK || !r.TimedOut {
		t.Errorf("a flood of an unreachable bus: %+v, want it unproven", r)
	}
}

// A reader that reads nothing while another publishes is cut by the bus
// at its pending bound; one that publishes nothing at it stays.
func TestSlowConsumerFlood(t *testing.T) {
	s, op := sharedBus(t)
	quiet := flood(t, Request{Op: "nats-slow", Name: "_INBOX.flock-1.slow", Count: 300})
	if !quiet.OK {
		t.Fatalf("a subscription no one publishes on: %s", quiet)
	}
	opc, err := nats.Connect(s.ClientURL(), func() nats.Option { o, _ := nats.NkeyOptionFromSeed(op); return o }())
	if err != nil {
		t.Fatal(err)
	}
	defer opc.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		big := bytes.Repeat([]byte("x"), 1<<20)
		for {
			select {
			case <-stop:
				return
			default:
				opc.Publish("_INBOX.flock-1.slow", big)
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	r := flood(t, Request{Op: "nats-slow", Name: "_INBOX.flock-1.slow", Count: 3000, TimeoutMS: 30_000})
	if r.OK || r.TimedOut || !strings.Contains(r.Err, "slow consumer") {
		t.Fatalf("a reader flooded and reading nothing: %s, want cut", r)
	}
}

// handshakeProxy is a proxy (with a model gateway behind it, as
// flock-proxy has, so a connection is told apart by its first bytes)
// that knows this process's uid as agent 1 with 2 handshakes; recorded
// counts the connections it is done with, by reason.
func handshakeProxy(t *testing.T) (addr string, recorded func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	reasons := map[string]int{}
	srv := &proxy.Server{UIDs: anyUID{uint32(os.Getuid())}, Timeout: 10 * time.Second, Gateway: closer{},
		Record: func(r proxy.Record) { mu.Lock(); reasons[r.Reason]++; mu.Unlock() }}
	srv.SetPolicy(proxy.Policy{Agents: map[uint32]proxy.AgentRules{uint32(os.Getuid()): {ID: 1, Tunnels: 4, Handshakes: 2}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go srv.Serve(ln)
	return ln.Addr().String(), func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(reasons)
	}
}

// The proxy's handshakes: held beyond the share are refused at once with
// the proxy's 403 naming it; within it, all are held. As the audit runs
// them: the agent's (its own socket) and its control's (a socket made as
// a uid, DialAs; this proxy knows every uid as the agent).
func TestProxyHandshakeFlood(t *testing.T) {
	addr, recorded := handshakeProxy(t)
	total := 0
	// Each flood's connections closed, the proxy gives their places back.
	released := func(n int) {
		t.Helper()
		total += n
		deadline := time.Now().Add(10 * time.Second)
		for {
			sum := 0
			for _, v := range recorded() {
				sum += v
			}
			if sum == total {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the proxy recorded %v, want %d connections done", recorded(), total)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	hs := Request{Op: "proxy-handshakes", Addr: addr, Name: "flock-audit.invalid:443"}
	for _, tc := range []struct {
		name   string
		count  int
		uid    int
		refuse string // "" within the share: OK
	}{
		{"within, the agent's", 2, 0, ""},
		{"within, as its uid from outside", 2, os.Getuid() + 1, ""},
		{"beyond, the agent's", 3, 0, "1 of 3 handshakes refused (2 held): 403 Forbidden"},
		{"beyond, as its uid from outside", 4, os.Getuid() + 1, "2 of 4 handshakes refused (2 held)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hs
			r.Count, r.Key = tc.count, tc.uid
			before := recorded()[proxy.ReasonHandshakes]
			got := flood(t, r)
			released(tc.count)
			switch {
			case tc.refuse == "" && !got.OK:
				t.Fatalf("within the share: %s", got)
			case tc.refuse != "" && (got.OK || got.TimedOut || !strings.Contains(got.Err, tc.refuse) || !strings.Contains(got.Err, "agents[id=1].shares.handshakes")):
				t.Fatalf("beyond the share: %s (timed out %v), want refused with %q naming the share", got, got.TimedOut, tc.refuse)
			}
			if over := recorded()[proxy.ReasonHandshakes] - before; over != max(tc.count-2, 0) {
				t.Errorf("the proxy recorded %d refusals over handshakes, want %d", over, max(tc.count-2, 0))
			}
		})
	}
	// The system tier's flood, through $HTTPS_PROXY to a target.
	t.Setenv("HTTPS_PROXY", "http://"+addr)
	r := flood(t, Request{Op: "proxy-flood", Addr: "api.example.com:443", Count: 3})
	released(3)
	if r.OK || r.TimedOut || !strings.Contains(r.Err, "1 of 3 handshakes refused (2 held)") || !strings.Contains(r.Err, "shares.handshakes") {
		t.Errorf("proxy-flood beyond the share: %s", r)
	}
	// Refused from the first (no proxy there), it proves nothing.
	if r := flood(t, Request{Op: "proxy-handshakes", Addr: "127.0.0.1:1", Count: 3}); r.OK || !r.TimedOut {
		t.Errorf("handshakes with no proxy: %+v, want it unproven", r)
	}
}

// closer is a model gateway that takes nothing.
type closer struct{}

func (closer) Handoff(c net.Conn) { c.Close() }

type anyUID struct{ uid uint32 }

func (a anyUID) UID(_, _ netip.AddrPort) (uint32, error) { return a.uid, nil }
