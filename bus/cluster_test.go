package bus

// Tier: unit. Three buses in this process form one cluster on loopback
// (routes with mutual TLS and a password, JetStream R3), as three hosts'
// buses would.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// TestClusterTasksAcrossHosts: the cluster forms, its streams keep three
// copies, a task sent on a is done by a worker on b and its result read
// on a, and the operator's requests are answered by its own host's bus.
func TestClusterTasksAcrossHosts(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{wire.TasksStream, wire.ResultsStream, wire.DeadStream, givenUpStream} {
		waitForWithin(t, 20*time.Second, name+" with a leader and two current replicas", func() bool {
			info := streamInfo(t, js, name)
			return info.Config.Replicas == 3 && info.Cluster != nil && info.Cluster.Leader != "" &&
				len(info.Cluster.Replicas) == 2 && info.Cluster.Replicas[0].Current && info.Cluster.Replicas[1].Current
		})
	}

	e := newEcho()
	startWorker(t, tc.servers[1].ClientURL(), tc.ids, 2, e.handler(2))
	send(t, op.Conn, wire.AgentTasks(2), "on-b", "hello b")
	got := waitResults(t, op.Conn, 20*time.Second, "on-b")
	if r := got["on-b"]; len(r) != 1 || r[0].Agent != 2 || r[0].Output != "hello b" {
		t.Fatalf("result of task on-b: %+v", r)
	}

	// The orchestrator (agent 1, on a) hands a task to the worker on c
	// and hears its result, as an agent: subjects and permissions are
	// the same across the cluster.
	startWorker(t, tc.servers[2].ClientURL(), tc.ids, 4, e.handler(4))
	orch := connect(t, tc.servers[0], tc.ids, "flock-1")
	results, err := orch.SubscribeSync(wire.ResultSubject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.SendTask(context.Background(), orch.Conn, 1, wire.AgentTasks(4), "from-orchestrator", []byte("hello c")); err != nil {
		t.Fatalf("the orchestrator on a sends a task through a's desk: %v", err)
	}
	for {
		m, err := results.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatalf("the orchestrator on a heard no result from c: %v", err)
		}
		if r, err := wire.ParseResult(m.Header, m.Data); err == nil && r.TaskID == "from-orchestrator" {
			if r.Agent != 4 || r.Output != "hello c" {
				t.Errorf("the orchestrator's task on c: %+v", r)
			}
			break
		}
	}
	// Done on c, the task's place in the orchestrator's share on a is
	// given back: c's bus told every bus.
	waitFor(t, "a's count of agent 1's tasks back to none", func() bool { return tc.servers[0].shares.of(1).n == 0 })

	// /metrics on each host: its own agents only (another host's would
	// show as down there).
	for i, want := range [][]int{{1, 3, 5}, {2}, {4}} {
		snap, err := tc.servers[i].Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(snap.Agents)); !slices.Equal(got, want) {
			t.Errorf("snapshot of %s: agents %v, want %v", hostName(i), got, want)
		}
	}

	// Status: each bus counts its own host's connections (agent 2 is
	// on b), and says its own config.
	status := func(server string) wire.BusStatus {
		msg, err := op.RequestWithContext(ctx, wire.OnServer(wire.StatusSubject, server), nil)
		if err != nil {
			t.Fatal(err)
		}
		var st wire.BusStatus
		if err := json.Unmarshal(msg.Data, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	for i, want := range []int{0, 1, 0} {
		st := status(hostName(i))
		if n := st.Agents[2].Connections; n != want {
			t.Errorf("status on %s: agent 2 has %d connections, want %d (it is connected to b)", hostName(i), n, want)
		}
		if st.Config != tc.configs[i].Digest() {
			t.Errorf("status on %s: config %s, want its own %s", hostName(i), st.Config, tc.configs[i].Digest())
		}
	}
	if _, err := op.Request(wire.StatusSubject, nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("status without a host name in a cluster: %v, want no responders", err)
	}
	for i := range 5 {
		if _, err := op.RequestWithContext(ctx, wire.OnServer(wire.ReloadSubject, "a"), nil); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	if got := []int32{tc.reloads[0].Load(), tc.reloads[1].Load(), tc.reloads[2].Load()}; got[0] != 5 || got[1] != 0 || got[2] != 0 {
		t.Errorf("reloads of a, b, c after 5 asked of a: %v", got)
	}
	// Permissions and held are a's own too, and agent 2's leases its
	// host's (b): one answer each.
	for _, subj := range []string{wire.OnServer(wire.PermissionsSubject, "a"), wire.OnServer(wire.HeldSubject, "a"), wire.LeasesSubject(2)} {
		r := record(t, op, "_INBOX.answers.>")
		if err := op.PublishRequest(subj, "_INBOX.answers."+subj, wire.PermissionsRequest(2)); err != nil {
			t.Fatal(err)
		}
		firstData(t, r)
		// A second answer, from another bus, would come within this.
		time.Sleep(200 * time.Millisecond)
		r.mu.Lock()
		n := len(r.msgs)
		r.mu.Unlock()
		if n != 1 {
			t.Errorf("%s: %d answers", subj, n)
		}
	}
}

// firstData is the body of r's first message, waiting for it.
func firstData(t testing.TB, r *recorder) []byte {
	t.Helper()
	var data []byte
	waitFor(t, "an answer", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.msgs) > 0 {
			data = r.msgs[0].Data
			return true
		}
		return false
	})
	return data
}

func streamInfo(t testing.TB, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Logf("stream %s: %v", name, err)
		return &jetstream.StreamInfo{}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Logf("stream %s: %v", name, err)
		return &jetstream.StreamInfo{}
	}
	return info
}

// TestClusterRefusesStrangers: a server with a certificate of another CA,
// or without the route password, does not join.
func TestClusterRefusesStrangers(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	tc.waitReady()
	for _, tt := range []struct {
		name, password string
		otherCA        bool
	}{
		{"another CA's certificate", "route-secret", true},
		{"a wrong password", "guessed", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := newTestCA(t)
			if !tt.otherCA {
				ca = tc.ca
			}
			cl := ca.host(t, dir, "x", tt.password)
			// It trusts the flock's CA: only the flock's side refuses.
			if err := os.WriteFile(cl.CAFile, tc.ca.pem, 0o600); err != nil {
				t.Fatal(err)
			}
			ports := freePorts(t, 2)
			cl.Name, cl.Server, cl.Replicas, cl.Hosts = "flock", "x", 1, clusterHosts
			cl.Listen = fmt.Sprintf("127.0.0.1:%d", ports[1])
			cl.Routes = []string{tc.configs[0].Cluster.Listen}
			c := ForFlock(clusterFlock(), tc.ids.keys())
			c.Listen, c.Cluster = fmt.Sprintf("127.0.0.1:%d", ports[0]), &cl
			before := len(tc.logs[0].String())
			x, err := Start(c, Options{StoreDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Shutdown()
			want := map[bool]string{true: "TLS route handshake error", false: "authentication error"}[tt.otherCA]
			waitForWithin(t, 10*time.Second, "a to refuse the route ("+want+")", func() bool {
				return strings.Contains(tc.logs[0].String()[before:], want)
			})
			// The stranger registers its route to a on a's INFO, before a
			// reads its CONNECT and closes it (and again at each retry):
			// refused, it has none a moment after a's line; let in, it
			// would keep it.
			if !holdsWithin(5*time.Second, func() bool { return x.ns.NumRoutes() == 0 }) {
				t.Errorf("the stranger has %d routes", x.ns.NumRoutes())
			}
			for i, s := range tc.servers {
				rz, err := s.ns.Routez(nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rz.Routes {
					if r.RemoteName == "x" {
						t.Errorf("%s has a route to the stranger", hostName(i))
					}
				}
			}
		})
	}
}

// TestClusterHostLoss: 100 tasks flow to workers on a, b and c; b's bus
// stops half-way. Every task gets exactly one result, read on a; b
// started again on its store rejoins and its copies catch up.
func TestClusterHostLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a host's loss takes seconds of elections and redeliveries")
	}
	tc := newTestCluster(t, 3)
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	e := newEcho()
	slow := func(id int) agent.Handler {
		h := e.handler(id)
		return func(ctx context.Context, task agent.Task) wire.Result {
			time.Sleep(20 * time.Millisecond)
			return h(ctx, task)
		}
	}
	startWorker(t, tc.servers[0].ClientURL(), tc.ids, 5, slow(5))
	startWorker(t, tc.servers[1].ClientURL(), tc.ids, 2, slow(2))
	startWorker(t, tc.servers[2].ClientURL(), tc.ids, 4, slow(4))

	ids := taskIDs("loss", 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range ids {
			// A send the cluster did not confirm (its leader was on b) is
			// sent again: the task id keeps one copy.
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := operator.SendTask(ctx, op.Conn, wire.RoleTasks("worker"), id, []byte(id))
				cancel()
				if err == nil {
					break
				}
				if attempt == 30 {
					t.Errorf("task %s not stored: %v", id, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitForWithin(t, 30*time.Second, "30 results, some of them by agent 2 on b", func() bool {
		byB := 0
		for _, rs := range stored(t, op.Conn) {
			if rs[0].Agent == 2 {
				byB++
			}
		}
		return byB > 0 && len(stored(t, op.Conn)) >= 30
	})
	tc.servers[1].Shutdown()
	wg.Wait()
	got := waitResults(t, op.Conn, 90*time.Second, ids...)
	for _, id := range ids {
		if len(got[id]) != 1 || !got[id][0].OK {
			t.Errorf("task %s: results %+v", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d tasks have results, %d were sent", len(got), len(ids))
	}
	waitForWithin(t, 30*time.Second, "TASKS to be empty", func() bool { return streamMsgs(t, op.Conn, wire.TasksStream) == 0 })

	// b again, on its store: its copies catch up, its desk serves again.
	tc.start(1)
	tc.waitReady()
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{wire.TasksStream, wire.ResultsStream, wire.DeadStream} {
		waitForWithin(t, 30*time.Second, name+"'s copy on b to catch up", func() bool {
			info := streamInfo(t, js, name)
			if info.Cluster == nil {
				return false
			}
			if info.Cluster.Leader == "b" {
				return true
			}
			for _, r := range info.Cluster.Replicas {
				if r.Name == "b" && r.Current && r.Lag == 0 {
					return true
				}
			}
			return false
		})
	}
	send(t, op.Conn, wire.AgentTasks(2), "after", "b is back")
	if r := waitResults(t, op.Conn, 30*time.Second, "after")["after"]; len(r) != 1 || r[0].Agent != 2 {
		t.Errorf("the task for agent 2 on b after its return: %+v", r)
	}
	if got := stored(t, op.Conn); len(got) != len(ids)+1 {
		t.Errorf("%d tasks have results after b's return, want %d", len(got), len(ids)+1)
	}
}

// TestClusterDeadLetterOnce: a task no worker finishes is dead-lettered
// once, with one failed result, though every bus watches the
// max-deliveries advisories.
func TestClusterDeadLetterOnce(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.Tasks.MaxDeliveries = 2 })
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	send(t, op.Conn, wire.AgentTasks(2), "doomed", "poison")
	// Agent 2 on b takes it and never says a word, each delivery.
	w := connect(t, tc.servers[1], tc.ids, "flock-2")
	body, _ := json.Marshal(wire.NextRequest{WaitMS: 1000})
	waitForWithin(t, 30*time.Second, "a result for the task", func() bool {
		_, _ = w.Request(wire.Desk(2, wire.DeskNext), body, 2*time.Second)
		return len(stored(t, op.Conn)["doomed"]) > 0
	})
	waitForWithin(t, 10*time.Second, "TASKS to be empty", func() bool { return streamMsgs(t, op.Conn, wire.TasksStream) == 0 })
	if r := stored(t, op.Conn)["doomed"]; len(r) != 1 || r[0].OK || !strings.Contains(r[0].Error, "dead-lettered after 2 deliveries") {
		t.Errorf("results of the task: %+v, want one failed by the bus", r)
	}
	if n := streamMsgs(t, op.Conn, wire.DeadStream); n != 1 {
		t.Errorf("DEAD holds %d messages, want 1", n)
	}
	// The bus that dead-lettered it logs, then acknowledges the advisory.
	lines := 0
	waitForWithin(t, 10*time.Second, "the advisory taken and the dead letter logged", func() bool {
		lines = 0
		for _, l := range tc.logs {
			lines += strings.Count(l.String(), "task doomed (tasks.agent.2) dead-lettered")
		}
		return lines > 0 && streamMsgs(t, op.Conn, givenUpStream) == 0
	})
	if lines != 1 {
		t.Errorf("%d buses logged the dead letter, want 1", lines)
	}
}

// TestClusterReload: moving an agent to another host is a reload (its
// desk follows it, and no route drops); any other cluster change needs a
// restart.
func TestClusterReload(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	routes := tc.servers[0].ns.NumRoutes()

	moved := tc.configs[0]
	cl := *moved.Cluster
	cl.Hosts = map[int]string{1: "a", 3: "a", 5: "a", 2: "a", 4: "c"}
	moved.Cluster = &cl
	for i, s := range tc.servers {
		c := tc.configs[i]
		mc := *c.Cluster
		mc.Hosts = cl.Hosts
		c.Cluster = &mc
		if err := s.Reload(c); err != nil {
			t.Fatalf("moving agent 2 to a on %s: %v", hostName(i), err)
		}
	}
	e := newEcho()
	startWorker(t, tc.servers[0].ClientURL(), tc.ids, 2, e.handler(2))
	send(t, op.Conn, wire.AgentTasks(2), "moved", "on a now")
	if r := waitResults(t, op.Conn, 20*time.Second, "moved")["moved"]; len(r) != 1 || r[0].Agent != 2 {
		t.Errorf("result of the task for agent 2 on a: %+v", r)
	}
	if n := tc.servers[0].ns.NumRoutes(); n != routes {
		t.Errorf("a has %d routes after the reload, %d before", n, routes)
	}

	cl.Replicas = 1
	if err := tc.servers[0].Reload(moved); !errors.Is(err, ErrRestartNeeded) || !strings.Contains(err.Error(), "3 copies -> server a") {
		t.Errorf("reloading with 1 copy: %v, want ErrRestartNeeded naming the change", err)
	}
}

// TestClusterStartsWithoutQuorum: a bus whose peers are not up yet takes
// clients at once; its desk tells a worker to ask again (no violation)
// until the streams exist, made once the others come.
func TestClusterStartsWithoutQuorum(t *testing.T) {
	t.Parallel()
	tc := prepareTestCluster(t, 3)
	a := tc.start(0)
	op := connect(t, a, tc.ids, creds.OperatorName)
	if _, err := op.Request(wire.OnServer(wire.StatusSubject, "a"), nil, 5*time.Second); err != nil {
		t.Fatalf("status of a bus alone: %v", err)
	}
	w := connect(t, a, tc.ids, "flock-5")
	msg, err := w.Request(wire.Desk(5, wire.DeskNext), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := wire.ParseRefusal(msg.Header); r == nil || r.Kind != wire.RefusedUnavailable {
		t.Errorf("an ask before the streams exist: refusal %+v, want %s", r, wire.RefusedUnavailable)
	}
	if v := a.Status().Agents[5].ViolationsTotal; v != 0 {
		t.Errorf("agent 5 has %d violations for asking early", v)
	}
	e := newEcho()
	startWorker(t, a.ClientURL(), tc.ids, 5, e.handler(5))
	tc.start(1)
	tc.start(2)
	tc.waitReady()
	send(t, op.Conn, wire.AgentTasks(5), "late", "streams at last")
	if r := waitResults(t, op.Conn, 20*time.Second, "late")["late"]; len(r) != 1 || r[0].Agent != 5 {
		t.Errorf("result: %+v", r)
	}
	// The streams were made for this store_max: no bus may raise its bound
	// (a reload, which closes every client) as the cluster forms.
	for i, l := range tc.logs {
		if strings.Contains(l.String(), "store_max is now") {
			t.Errorf("bus %s raised its store's bound as the cluster formed (and closed its clients)", hostName(i))
		}
	}
}

// TestClusterWaitResultAcrossHosts: the operator on a waits for each of
// 60 results stored by a worker on b, one task at a time, as `flockctl
// send` does. With an ordered consumer about 2 waits in 100 took 10 s in
// the nspawn cluster (its first pull lost); each wait must end well
// within the 5 s heartbeat window that hid it.
//
// Tier: unit (three buses in one process, loopback).
func TestClusterWaitResultAcrossHosts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("60 round trips across a cluster: not with -short")
	}
	tc := newTestCluster(t, 3)
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	e := newEcho()
	startWorker(t, tc.servers[1].ClientURL(), tc.ids, 2, e.handler(2))
	var slowest time.Duration
	for i := range 60 {
		id := fmt.Sprintf("wait-%d", i)
		since := time.Now()
		send(t, op.Conn, wire.AgentTasks(2), id, "x")
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		res, err := operator.WaitResult(ctx, op.Conn, id, since)
		cancel()
		if err != nil {
			t.Fatalf("task %d: %v after %s", i, err, time.Since(since))
		}
		if res.TaskID != id || res.Agent != 2 {
			t.Fatalf("task %d: result %+v", i, res)
		}
		slowest = max(slowest, time.Since(since))
	}
	t.Logf("60 round trips a -> b -> a, the slowest %s", slowest)
}
