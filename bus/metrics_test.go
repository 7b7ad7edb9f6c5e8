package bus

import (
	"context"
	"testing"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// TestSnapshotCounts: what /metrics reads of a real bus moves with what
// happens on it: results stored through the desk by result, the egress
// proxy's decisions by decision (a denial held back counted with the
// next), tasks pending for a worker that is not there, the store and the
// connections.
//
// Tier: unit (no root).
func TestSnapshotCounts(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append([]string{creds.ProxyName}, everyoneAnd4...)...)
	s := taskBus(t, ids, Options{}, nil)
	op := connect(t, s, ids, creds.OperatorName)
	proxy := connect(t, s, ids, creds.ProxyName)
	startWorker(t, s.ClientURL(), ids, 2, func(_ context.Context, tk agent.Task) wire.Result {
		return wire.Result{OK: string(tk.Payload) == "good", Error: map[bool]string{true: "bad payload"}[string(tk.Payload) != "good"]}
	})

	for _, p := range []struct{ id, payload string }{{"a", "good"}, {"b", "good"}, {"c", "bad"}} {
		send(t, op.Conn, wire.AgentTasks(2), p.id, p.payload)
	}
	send(t, op.Conn, wire.AgentTasks(4), "for-4", "no worker 4 runs") // pending
	waitResults(t, op.Conn, 10*time.Second, "a", "b", "c")

	for _, e := range []wire.EgressEvent{
		{Agent: 1, Decision: "allow"},
		{Agent: 1, Decision: "deny", Suppressed: 2},
		{Agent: 2, Decision: "deny"},
		{Agent: 0, Decision: "deny"}, // not an agent: not counted
		// Over its shares of the proxy: violations too, held-back ones
		// with the next (the proxy holds back per agent and reason).
		{Agent: 4, Decision: "deny", Reason: wire.EgressOverTunnels, Suppressed: 4},
		{Agent: 4, Decision: "deny", Reason: wire.EgressOverHandshakes},
	} {
		b, err := wire.EncodeEgress(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := proxy.Publish(wire.EgressSubject(e.Agent), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := proxy.Flush(); err != nil {
		t.Fatal(err)
	}

	var snap Snapshot
	waitFor(t, "the egress decisions counted", func() bool {
		var err error
		snap, err = s.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// A result is stored before its task is acknowledged: the work
		// queue lets the task go a moment after the result shows.
		return snap.Agents[2].Egress["deny"] == 1 && snap.TasksPending == 1
	})
	if a := snap.Agents[2]; a.TasksOK != 2 || a.TasksFailed != 1 || a.Connections != 1 {
		t.Errorf("agent 2: %+v, want 2 ok, 1 failed, 1 connection", a)
	}
	if e := snap.Agents[1].Egress; e["allow"] != 1 || e["deny"] != 3 {
		t.Errorf("agent 1's egress: %v, want allow 1, deny 3 (one sent, two held back)", e)
	}
	if _, ok := snap.Agents[0]; ok || len(snap.Agents) != 4 {
		t.Errorf("agents %v, want the config's 1-4", snap.Agents)
	}
	if v := s.Status().Agents[4].Violations; v[wire.ViolationTunnels] != 5 || v[wire.ViolationHandshakes] != 1 {
		t.Errorf("agent 4's violations %v, want 5 tunnels and 1 handshakes", v)
	}
	if snap.TasksPending != 1 || snap.TasksRunning != 0 || snap.TasksDead != 0 {
		t.Errorf("tasks pending %d running %d dead %d, want 1 0 0", snap.TasksPending, snap.TasksRunning, snap.TasksDead)
	}
	if snap.StoreBytes == 0 || snap.StoreMax != DefaultStoreMax {
		t.Errorf("store %d of %d, want some of %d", snap.StoreBytes, snap.StoreMax, int64(DefaultStoreMax))
	}
	// The streams' shares of store_max (streamConfigs), and their bytes.
	for name, share := range map[string]uint64{wire.TasksStream: DefaultStoreMax / 2, wire.ResultsStream: DefaultStoreMax * 3 / 8, wire.DeadStream: DefaultStoreMax * 7 / 64} {
		if st := snap.Streams[name]; st.Max != share {
			t.Errorf("stream %s: bound %d, want %d", name, st.Max, share)
		}
	}
	if st := snap.Streams; st[wire.TasksStream].Bytes == 0 || st[wire.ResultsStream].Bytes == 0 || st[wire.DeadStream].Bytes != 0 {
		t.Errorf("streams %+v: want bytes in TASKS (one pending) and RESULTS (three), none in DEAD", st)
	}
	if snap.Connections != 3 { // the operator, the proxy, worker 2
		t.Errorf("%d connections, want 3", snap.Connections)
	}
}
