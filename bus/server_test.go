package bus

// Tier: unit (no root).

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/syncbuf"
	"github.com/flockrun/flock/wire"
)

// TestViolationsLoggedByName checks that a violation's log line names the
// agent, not its nkey, and that Status counts it.
//
// Tier: unit (no root).
func TestViolationsLoggedByName(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	var log syncbuf.Buffer
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Log: &log, Debug: true})
	worker := connect(t, s, ids, "flock-2")

	if err := worker.Publish("agent.1.heartbeat", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.SubscribeSync("_INBOX.flock-1.>"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two violations of agent 2", func() bool { return s.Status().Agents[2].ViolationsTotal == 2 })

	for _, want := range []string{`Publish Violation - Subject "agent.1.heartbeat"`, `Subscription Violation - Subject "_INBOX.flock-1.>"`} {
		var line string
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, want) {
				line = l
			}
		}
		if !strings.HasPrefix(line, "[ERR] ") || !strings.Contains(line, `"$G/flock-2"`) {
			t.Errorf("the line of %s does not name flock-2 at level error: %q", want, line)
		}
	}
	pub, _ := ids["flock-2"].PublicKey()
	if strings.Contains(log.String(), pub) {
		t.Errorf("the log shows the worker's nkey:\n%s", log.String())
	}
	if st := s.Status(); st.Agents[1].ViolationsTotal != 0 || st.Agents[3].ViolationsTotal != 0 {
		t.Errorf("violations counted against the wrong agent: %+v", st.Agents)
	}
}

// TestStatus checks connections and the last heartbeat, from Status and
// from the operator's request over the bus.
//
// Tier: unit (no root).
func TestStatus(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	worker := connect(t, s, ids, "flock-2")
	connect(t, s, ids, "flock-2")
	connect(t, s, ids, "flock-3")
	op := connect(t, s, ids, creds.OperatorName)

	// The body claims agent 9; the bus believes the subject.
	hb := wire.HeartbeatMsg{Agent: 9, Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), UptimeS: 12.5, RSSBytes: 4096, TasksDone: 3, TasksFailed: 1}
	data, _ := json.Marshal(hb)
	if err := worker.Publish(wire.Heartbeat(2), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent 2's heartbeat", func() bool { return s.Status().Agents[2].LastHeartbeat != nil })

	st := s.Status()
	hb.Agent = 2
	if got := st.Agents[2]; got.Connections != 2 || *got.LastHeartbeat != hb || got.ViolationsTotal != 0 {
		t.Errorf("agent 2: %+v, heartbeat %+v; want 2 connections and %+v", got, got.LastHeartbeat, hb)
	}
	if got := st.Agents[3]; got.Connections != 1 || got.LastHeartbeat != nil {
		t.Errorf("agent 3: %+v, want 1 connection, no heartbeat", got)
	}
	if _, ok := st.Agents[1]; ok {
		t.Errorf("agent 1 never connected but is listed: %+v", st.Agents[1])
	}
	if len(st.Agents) != 2 || time.Since(st.Started) > time.Minute || st.Started.After(time.Now()) {
		t.Errorf("status %+v", st)
	}

	m, err := op.Request(wire.StatusSubject, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var overBus wire.BusStatus
	if err := json.Unmarshal(m.Data, &overBus); err != nil {
		t.Fatalf("status reply %q: %v", m.Data, err)
	}
	want, _ := json.Marshal(s.Status())
	if got, _ := json.Marshal(overBus); string(got) != string(want) {
		t.Errorf("status over the bus\n got %s\nwant %s", got, want)
	}
}

// TestHeartbeatsFromAnyClient checks the seed contract: any message on
// agent.N.heartbeat is N's heartbeat when the bus receives it, with a
// string id, no body, or a body it cannot read; and an agent flooding
// unreadable heartbeats gets at most one warning a minute in the log.
//
// Tier: unit (no root).
func TestHeartbeatsFromAnyClient(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	var log syncbuf.Buffer
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Log: &log})
	worker := connect(t, s, ids, "flock-2")
	monitor := connect(t, s, ids, "flock-3")
	beatAfter := func(id int, since time.Time) func() bool {
		return func() bool {
			at := s.Status().Agents[id].HeartbeatAt
			return at != nil && at.After(since)
		}
	}
	for _, tc := range []struct {
		name string
		body string
		want wire.HeartbeatMsg
	}{
		{"the id as a string, as the npm client's agents send it", `{"agent":"2","uptime_s":4}`, wire.HeartbeatMsg{Agent: 2, UptimeS: 4}},
		{"no body", "", wire.HeartbeatMsg{Agent: 2}},
		{"a body that is not JSON", "alive", wire.HeartbeatMsg{Agent: 2}},
		{"another agent's id in the body", `{"agent":3,"tasks_done":5}`, wire.HeartbeatMsg{Agent: 2, TasksDone: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			if err := worker.Publish(wire.Heartbeat(2), []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "agent 2's heartbeat", beatAfter(2, before))
			if got := *s.Status().Agents[2].LastHeartbeat; got != tc.want {
				t.Errorf("heartbeat %+v, want %+v", got, tc.want)
			}
		})
	}

	// 1000 unreadable heartbeats in well under a second, then a readable
	// one from another agent: all heard, and still the one warning the
	// first unreadable body above wrote.
	start := len(log.String())
	for i := 0; i < 1000; i++ {
		if err := worker.Publish(wire.Heartbeat(2), []byte("{not json")); err != nil {
			t.Fatal(err)
		}
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := monitor.Publish(wire.Heartbeat(3), []byte(`{"agent":3}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent 3's heartbeat after the flood", beatAfter(3, before))
	// The bus's own client reads in order: agent 2's flood came first.
	if n := strings.Count(log.String(), "heartbeat whose body could not be read"); n != 1 {
		t.Errorf("%d warnings for 1001 unreadable heartbeats within a minute, want 1:\n%s", n, tailOf(log.String(), 600))
	}
	if flood := log.String()[start:]; strings.Count(flood, "\n") > 3 {
		t.Errorf("the flood wrote these log lines, want a handful:\n%s", tailOf(flood, 600))
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestReload checks that a reload adds and removes users while a staying
// user's connection stays up, and that moving a listener needs a restart.
//
// Tier: unit (no root).
func TestReload(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	f := testFlock()
	s := startBus(t, ForFlock(f, ids.keys("flock-3")), Options{})
	var disconnects atomic.Int32
	worker := connect(t, s, ids, "flock-2", nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	tasks, err := worker.SubscribeSync(wire.Broadcast)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	op := connect(t, s, ids, creds.OperatorName)
	if _, err := dial(s, ids, "flock-3"); err == nil {
		t.Fatal("the monitor connected before it was added")
	}

	// Add the monitor.
	if err := s.Reload(ForFlock(f, ids.keys())); err != nil {
		t.Fatal(err)
	}
	connect(t, s, ids, "flock-3")
	if err := op.Publish(wire.Broadcast, []byte("after reload")); err != nil {
		t.Fatal(err)
	}
	if m, err := tasks.NextMsg(5 * time.Second); err != nil || string(m.Data) != "after reload" {
		t.Fatalf("the worker's subscription after the reload: %v, %v", m, err)
	}
	if !worker.IsConnected() || worker.Stats().Reconnects != 0 || disconnects.Load() != 0 {
		t.Fatalf("the worker's connection did not survive the reload: connected %v, reconnects %d, disconnects %d",
			worker.IsConnected(), worker.Stats().Reconnects, disconnects.Load())
	}

	// Remove the worker.
	if err := s.Reload(ForFlock(f, ids.keys("flock-2"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed worker's connection to close", worker.IsClosed)
	if n := s.Status().Agents[2].Connections; n != 0 {
		t.Errorf("agent 2 still has %d connections", n)
	}
	// The bus's own user survived both reloads.
	if _, err := op.Request(wire.StatusSubject, nil, 5*time.Second); err != nil {
		t.Errorf("status request after the reloads: %v", err)
	}

	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:4999" }},
		{"monitor", func(c *Config) { c.Monitor = "127.0.0.1:8999" }},
		{"metrics", func(c *Config) { c.Metrics = "127.0.0.1:8998" }},
		{"store_max", func(c *Config) { c.Tasks.StoreMax = 2 << 30 }},
		{"sync", func(c *Config) { c.Tasks.Sync = time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ForFlock(f, ids.keys())
			tc.change(&c)
			if err := s.Reload(c); !errors.Is(err, ErrRestartNeeded) {
				t.Errorf("Reload with another %s: %v, want ErrRestartNeeded", tc.name, err)
			}
		})
	}
}

// TestReloadOverTheBus checks the operator's reload request: OnReload
// runs, its error is the reply, and the bus keeps working after it.
//
// Tier: unit (no root).
func TestReloadOverTheBus(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	f := testFlock()
	var s *Server
	var fail atomic.Pointer[error]
	s = startBus(t, ForFlock(f, ids.keys("flock-3")), Options{OnReload: func() error {
		if err := fail.Load(); err != nil {
			return *err
		}
		return s.Reload(ForFlock(f, ids.keys()))
	}})
	op := connect(t, s, ids, creds.OperatorName)

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"the handler fails", errors.New("reading /etc/flock/bus.json: no such file"), "reading /etc/flock/bus.json: no such file"},
		{"the handler reloads", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err != nil {
				fail.Store(&tc.err)
			} else {
				fail.Store(nil)
			}
			m, err := op.Request(wire.ReloadSubject, nil, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != tc.want {
				t.Errorf("reply %q, want %q", m.Data, tc.want)
			}
		})
	}
	// The monitor was added; heartbeats still reach the bus's own client.
	mon := connect(t, s, ids, "flock-3")
	if err := mon.Publish(wire.Heartbeat(3), []byte(`{"agent":3}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent 3's heartbeat", func() bool { return s.Status().Agents[3].LastHeartbeat != nil })
}

// TestStartRefuses checks Start's errors: a taken port, and configurations
// nats-server would reject or misattribute.
//
// Tier: unit (no root).
func TestStartRefuses(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ids := newIdentities(t, everyone...)
	good := ForFlock(testFlock(), ids.keys())
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"port taken", func(c *Config) { c.Listen = taken.Addr().String() }, "address already in use"},
		{"monitor port taken", func(c *Config) { c.Monitor = taken.Addr().String() }, "address already in use"},
		{"listen not host:port", func(c *Config) { c.Listen = "localhost" }, `listen: "localhost" is not host:port`},
		{"not a user key", func(c *Config) { c.Users[0].Nkey = "ABC" }, `"ABC" is not a public user nkey`},
		{"a key twice", func(c *Config) { c.Users[1].Nkey = c.Users[0].Nkey }, "is already another user's"},
		{"a name twice", func(c *Config) { c.Users[1].Name, c.Users[1].Agent = c.Users[0].Name, c.Users[0].Agent }, "flock-1 appears twice"},
		{"name and agent disagree", func(c *Config) { c.Users[0].Agent = 7 }, "name flock-1 does not go with agent 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ForFlock(testFlock(), ids.keys())
			tc.change(&c)
			start := time.Now()
			s, err := Start(c, Options{StoreDir: t.TempDir()})
			if err == nil {
				s.Shutdown()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusing took %s", d)
			}
		})
	}
	if _, err := Start(good, Options{}); err == nil || !strings.Contains(err.Error(), "no store directory") {
		t.Errorf("Start without a store directory: %v", err)
	}
	s := startBus(t, good, Options{})
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("ClientURL %s", s.ClientURL())
	}
}

// TestSeedFileConnects checks that a seed file is all a client needs: the
// format nats.NkeyOptionFromSeed (and the nats CLI's --nkey) reads.
//
// Tier: unit (no root).
func TestSeedFileConnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := creds.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	keys := map[string]string{}
	for _, name := range []string{"flock-2", creds.OperatorName} {
		pub, _, err := store.Ensure(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = pub
	}
	s := startBus(t, ForFlock(testFlock(), keys), Options{})
	for _, name := range []string{"flock-2", creds.OperatorName} {
		opt, err := nats.NkeyOptionFromSeed(store.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), opt, nats.NoReconnect())
		if err != nil {
			t.Fatalf("%s connecting with its seed file: %v", name, err)
		}
		nc.Close()
	}
	if st := s.Status(); st.Agents[1].Connections != 0 {
		t.Errorf("agent 1 has no key but %d connections", st.Agents[1].Connections)
	}
}
