package bus

// Helpers of the server tests: a real in-process nats-server on a free
// loopback port, real nats.go clients over TCP, one real nkey per user.

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// testFlock is orchestrator 1 (with the default share of TASKS), worker 2
// (granted reports.>) and monitor 3 on a free port; no share of
// connections.
func testFlock() *spec.Flock {
	return &spec.Flock{
		Bus: spec.Bus{Host: "127.0.0.1", Port: -1},
		Agents: []spec.Agent{
			{ID: 1, Role: spec.RoleOrchestrator, TaskTimeout: spec.DefaultTimeout,
				Shares: spec.Shares{Tasks: spec.DefaultTaskShare, TaskBytes: spec.DefaultTaskBytes}},
			{ID: 2, Role: spec.RoleWorker, TaskTimeout: spec.DefaultTimeout, Subjects: spec.Subjects{Publish: []string{"reports.>"}}},
			{ID: 3, Role: spec.RoleMonitor, TaskTimeout: spec.DefaultTimeout},
		},
	}
}

// identities holds a fresh key pair per user name.
type identities map[string]nkeys.KeyPair

func newIdentities(t testing.TB, names ...string) identities {
	t.Helper()
	ids := identities{}
	for _, n := range names {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = kp
	}
	return ids
}

// everyone is the users of testFlock and the operator.
var everyone = []string{"flock-1", "flock-2", "flock-3", creds.OperatorName}

// keys is the public keys of ids, leaving out the names in without.
func (ids identities) keys(without ...string) map[string]string {
	m := map[string]string{}
	for n, kp := range ids {
		if !slices.Contains(without, n) {
			m[n], _ = kp.PublicKey()
		}
	}
	return m
}

// startBus starts a bus for c, shut down when the test ends; its store is
// a fresh temporary directory unless o names one.
func startBus(t testing.TB, c Config, o Options) *Server {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	s, err := Start(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// client is a connection and the asynchronous errors the server sent it.
type client struct {
	*nats.Conn
	mu   sync.Mutex
	errs []error
}

// connect connects as name with its key from ids; agents use their own
// inbox prefix as flock-agent does. The connection does not reconnect, so
// a dropped connection shows as closed.
func connect(t testing.TB, s *Server, ids identities, name string, extra ...nats.Option) *client {
	t.Helper()
	c, err := dial(s, ids, name, extra...)
	if err != nil {
		t.Fatalf("connecting as %s: %v", name, err)
	}
	t.Cleanup(c.Close)
	return c
}

func dial(s *Server, ids identities, name string, extra ...nats.Option) (*client, error) {
	c := &client{}
	kp := ids[name]
	pub, _ := kp.PublicKey()
	opts := []nats.Option{
		nats.Name(name),
		nats.Nkey(pub, kp.Sign),
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}),
	}
	if id, ok := agentID(name); ok {
		opts = append(opts, nats.CustomInboxPrefix(wire.Inbox(id)))
	}
	nc, err := nats.Connect(s.ClientURL(), append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	c.Conn = nc
	return c, nil
}

func agentID(name string) (int, bool) {
	var id int
	_, err := fmt.Sscanf(name, "flock-%d", &id)
	return id, err == nil
}

// waitErr waits for an asynchronous error containing want.
func (c *client) waitErr(t testing.TB, want string) {
	t.Helper()
	waitFor(t, "error "+want, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.errs {
			if strings.Contains(err.Error(), want) {
				return true
			}
		}
		return false
	})
}

func (c *client) errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// recorder is a subscription that keeps every message it got, in order.
type recorder struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func record(t testing.TB, nc *client, subject string) *recorder {
	t.Helper()
	r := &recorder{}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r.mu.Lock()
		r.msgs = append(r.msgs, m)
		r.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitMsg waits for a message on subject with data and returns the
// messages received before it.
func (r *recorder) waitMsg(t testing.TB, subject, data string) []*nats.Msg {
	t.Helper()
	var before []*nats.Msg
	waitFor(t, fmt.Sprintf("%q on %s", data, subject), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, m := range r.msgs {
			if m.Subject == subject && string(m.Data) == data {
				before = append(before, r.msgs[:i]...)
				return true
			}
		}
		return false
	})
	return before
}
