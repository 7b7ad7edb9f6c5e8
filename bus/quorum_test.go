package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// TestClusterMinorityRefusesTasks: with one host of three gone the other
// two store tasks as before; with two gone, a task sent on the one left
// is refused within a second with the bus's reason (a JetStream error, as
// any client reads it), not "no response" or a timeout, and nothing is
// stored; back to three, it is stored again.
//
// Tier: unit (three buses in one process, loopback).
func TestClusterMinorityRefusesTasks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for elections: not with -short")
	}
	tc := newTestCluster(t, 3)
	tc.waitReady()
	op := connect(t, tc.servers[0], tc.ids, creds.OperatorName)
	sendWithin := func(id string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		_, err := operator.SendTask(ctx, op.Conn, wire.AgentTasks(2), id, []byte(id))
		return time.Since(t0), err
	}
	// Idle for longer than a copy may go unheard: the leader's heartbeats
	// keep every copy sure of it, and no bus refuses.
	for end := time.Now().Add(peerSilence + 2*time.Second); time.Now().Before(end); time.Sleep(quorumEvery) {
		for i, s := range tc.servers {
			if why := s.quorumWhy(); why != "" {
				t.Fatalf("%s, idle with all three up, refuses tasks: %s", hostName(i), why)
			}
		}
	}
	tc.servers[2].Shutdown()
	// a and b are a majority: every task is stored (a leader election
	// on c's loss may cost a try).
	for _, id := range taskIDs("two-of-three", 5) {
		waitForWithin(t, 20*time.Second, "task "+id+" stored by a and b", func() bool { _, err := sendWithin(id); return err == nil })
	}
	waitForWithin(t, 5*time.Second, "a with b not to refuse", func() bool { return tc.servers[0].quorumWhy() == "" })

	tc.servers[1].Shutdown()
	var took time.Duration
	var err error
	n := 0
	waitForWithin(t, 60*time.Second, "a alone to refuse tasks with its reason", func() bool {
		n++
		took, err = sendWithin("alone-" + string(rune('a'+n%26)) + time.Now().Format("150405.000"))
		var refused *operator.NotStoredError
		return errors.As(err, &refused)
	})
	t.Logf("a alone, after %d tries: refused in %v: %v", n, took, err)
	if took > time.Second {
		t.Errorf("the refusal took %v", took)
	}
	for _, want := range []string{" stored: host a cannot store tasks now", "majority (2) of the 3 copies"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if st := tc.servers[0].Status(); st.NoQuorum == "" {
		t.Errorf("a's status does not say it refuses tasks")
	}
	// An orchestrator sends through the desk (agent.SendTask) and gets the
	// same words in the desk's refusal.
	orch := connect(t, tc.servers[0], tc.ids, "flock-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = agent.SendTask(ctx, orch.Conn, 1, wire.AgentTasks(2), "", []byte("from the orchestrator"))
	cancel()
	var deskRefusal *wire.Refusal
	if !errors.As(err, &deskRefusal) || !strings.Contains(deskRefusal.Reason, "host a cannot store tasks now") {
		t.Errorf("the orchestrator's send on a alone: %v, want the desk's refusal with the bus's reason", err)
	}

	tc.start(1)
	tc.start(2)
	tc.waitReady()
	waitForWithin(t, 60*time.Second, "a to store tasks again", func() bool { _, err := sendWithin("back-1"); return err == nil })
	waitForWithin(t, 5*time.Second, "a to stop refusing", func() bool { return tc.servers[0].quorumWhy() == "" })
}

// TestViewOf reads the cluster information of a copy of TASKS.
// Tier: unit.
func TestViewOf(t *testing.T) {
	t.Parallel()
	peer := func(name string, active time.Duration) *server.PeerInfo {
		return &server.PeerInfo{Name: name, Current: active < peerSilence, Active: active}
	}
	for _, tc := range []struct {
		name         string
		ci           server.ClusterInfo
		doubt, maybe bool
		why          string
	}{
		{"leader with both", server.ClusterInfo{Leader: "a", Replicas: []*server.PeerInfo{peer("b", time.Second), peer("c", time.Second)}}, false, false, ""},
		{"leader with one", server.ClusterInfo{Leader: "a", Replicas: []*server.PeerInfo{peer("b", time.Second), peer("c", time.Minute)}}, false, false, ""},
		{"leader alone", server.ClusterInfo{Leader: "a", Replicas: []*server.PeerInfo{peer("b", 9*time.Second), peer("c", time.Minute)}}, true, true,
			"host a cannot store tasks now: it leads TASKS without a majority of its copies (in the last 4s it heard from a, not from b, c). A task is stored once a majority (2) of the 3 copies of TASKS have it"},
		{"no leader", server.ClusterInfo{Replicas: []*server.PeerInfo{peer("a", 0), peer("b", time.Second), peer("c", time.Minute)}}, true, false,
			"no leader of TASKS is reachable from it (in the last 4s it heard from a, b, not from c)"},
		{"follower of a live leader", server.ClusterInfo{Leader: "b", Replicas: []*server.PeerInfo{peer("b", time.Second), {Name: "c"}}}, false, false, ""},
		{"follower of a leader it has no time for", server.ClusterInfo{Leader: "b", Replicas: []*server.PeerInfo{{Name: "b"}, {Name: "c"}}}, false, false, ""},
		{"follower of a silent leader", server.ClusterInfo{Leader: "b", Replicas: []*server.PeerInfo{peer("b", 6*time.Second), {Name: "c"}}}, true, true,
			"no leader of TASKS is reachable from it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := viewOf("a", 3, &tc.ci)
			if v.doubt != tc.doubt || v.maybe() != tc.maybe || !strings.Contains(v.why, tc.why) {
				t.Errorf("viewOf: %+v, want doubt %v maybe %v, saying %q", v, tc.doubt, tc.maybe, tc.why)
			}
		})
	}
}
