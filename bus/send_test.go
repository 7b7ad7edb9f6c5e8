package bus

// Tier: unit (no root): a real bus, real clients.

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// twoSenders is twoWorkers with a second orchestrator, 5, each with a
// share of 3 tasks and 64K.
func twoSenders() *spec.Flock {
	f := twoWorkers()
	f.Agents = append(f.Agents, spec.Agent{ID: 5, Role: spec.RoleOrchestrator, TaskTimeout: spec.DefaultTimeout})
	for i := range f.Agents {
		if f.Agents[i].Role == spec.RoleOrchestrator {
			f.Agents[i].Shares = spec.Shares{Tasks: 3, TaskBytes: 64 << 10}
		}
	}
	return f
}

func sendAs(t *testing.T, c *client, id int, subject, taskID string, payload []byte) (wire.Sent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return agent.SendTask(ctx, c.Conn, id, subject, taskID, payload)
}

func refusalOf(err error) string {
	var r *wire.Refusal
	if errors.As(err, &r) {
		return r.Kind
	}
	return ""
}

// An orchestrator's tasks go into TASKS within its share: the one beyond
// is refused at once, naming the numbers, and counted; the other
// orchestrator sends as before; a task done frees its place; nothing
// stored is ever dropped.
func TestTaskShare(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	s := startBus(t, func() Config { c := ForFlock(twoSenders(), ids.keys()); c.Tasks.AckWait = time.Second; return c }(), Options{})
	o1, o5, w4 := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-5"), connect(t, s, ids, "flock-4")
	op := connect(t, s, ids, creds.OperatorName)
	for i, id := range []string{"a", "b"} {
		sent, err := sendAs(t, o1, 1, wire.AgentTasks(4), id, []byte("task"))
		if err != nil || sent.Stream != wire.TasksStream || sent.Seq != uint64(i+1) {
			t.Fatalf("send %s within the share: %+v, %v", id, sent, err)
		}
	}
	// The same task again is a duplicate: stored once, no place taken.
	if sent, err := sendAs(t, o1, 1, wire.AgentTasks(4), "b", []byte("task")); err != nil || !sent.Duplicate || sent.Seq != 2 {
		t.Fatalf("a repeated send: %+v, %v", sent, err)
	}
	if _, err := sendAs(t, o1, 1, wire.AgentTasks(4), "c", []byte("task")); err != nil {
		t.Fatal(err)
	}
	_, err := sendAs(t, o1, 1, wire.AgentTasks(4), "d", []byte("task"))
	if refusalOf(err) != wire.RefusedOverShare || !strings.Contains(err.Error(), "agent 1 has 3 tasks of ") || !strings.Contains(err.Error(), "its share is 3 tasks and 65536 bytes") {
		t.Fatalf("the 4th task: %v, want refused over the share, naming the numbers", err)
	}
	if n := s.Status().Agents[1].Violations[wire.ViolationTasks]; n != 1 {
		t.Errorf("agent 1's tasks violations: %d, want 1", n)
	}
	for _, id := range []string{"e", "f", "g"} {
		if _, err := sendAs(t, o5, 5, wire.AgentTasks(2), id, []byte("task")); err != nil {
			t.Fatalf("the other orchestrator's task %s: %v", id, err)
		}
	}
	// Bytes count as well as tasks.
	if _, err := sendAs(t, o5, 5, wire.AgentTasks(4), "big", bytes.Repeat([]byte("x"), 64<<10)); refusalOf(err) != wire.RefusedOverShare {
		t.Fatalf("a task beyond the bytes share: %v", err)
	}
	if n := streamMsgs(t, op.Conn, wire.TasksStream); n != 6 {
		t.Fatalf("TASKS holds %d tasks, want 6", n)
	}

	// Agent 4 does one of agent 1's: its place is free at once.
	h, ok := ask(t, w4, 4, time.Second)
	if !ok || h.ID != "a" {
		t.Fatalf("agent 4 was handed %+v, %v", h, ok)
	}
	if kind := say(t, w4, 4, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true})); kind != "" {
		t.Fatalf("result refused: %s", kind)
	}
	if _, err := sendAs(t, o1, 1, wire.AgentTasks(4), "d", []byte("task")); err != nil {
		t.Fatalf("a task once one is done: %v", err)
	}
	if u := s.shares.of(1); u.n != 3 {
		t.Errorf("agent 1 holds %d tasks, want 3", u.n)
	}
}

// The count is read back from TASKS when the bus starts: a restart does
// not hand an orchestrator a fresh share.
func TestTaskShareOutlivesARestart(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	dir := t.TempDir()
	c := ForFlock(twoSenders(), ids.keys())
	s := startBus(t, c, Options{StoreDir: dir})
	o1 := connect(t, s, ids, "flock-1")
	for _, id := range []string{"a", "b"} {
		if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), id, []byte("task")); err != nil {
			t.Fatal(err)
		}
	}
	send(t, connect(t, s, ids, creds.OperatorName).Conn, wire.RoleTasks("worker"), "op", "the operator's: no share")
	s.Shutdown()
	s = startBus(t, c, Options{StoreDir: dir})
	if u := s.shares.of(1); u.n != 2 || u.bytes != s.sharesBytesOf(t, 1) {
		t.Fatalf("after a restart agent 1 holds %+v", u)
	}
	o1 = connect(t, s, ids, "flock-1")
	if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), "c", []byte("task")); err != nil {
		t.Fatal(err)
	}
	if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), "d", []byte("task")); refusalOf(err) != wire.RefusedOverShare {
		t.Fatalf("the 4th task after a restart: %v", err)
	}
}

// Tasks a damaged store lost from the server and the bus put back
// (storecheck.go) count against their sender's share as before.
func TestTaskShareOutlivesADamagedStore(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	dir := t.TempDir()
	c := ForFlock(twoSenders(), ids.keys())
	s := startBus(t, c, Options{StoreDir: dir})
	send(t, connect(t, s, ids, creds.OperatorName).Conn, wire.RoleTasks("worker"), "op", "the operator's: no share")
	o1 := connect(t, s, ids, "flock-1")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), id, []byte("task")); err != nil {
			t.Fatal(err)
		}
	}
	s.Shutdown()
	damageRecord(t, dir, wire.TasksStream, 1) // the server cuts the block there: a, b and c are put back
	s = startBus(t, c, Options{StoreDir: dir})
	if st := s.Status().Store; len(st) != 1 || st[0].PutBack != 3 {
		t.Fatalf("the store's problems: %+v, want 3 tasks put back", st)
	}
	if u := s.shares.of(1); u.n != 3 || u.bytes != s.sharesBytesOf(t, 1) {
		t.Fatalf("after the tasks were put back agent 1 holds %+v", u)
	}
	o1 = connect(t, s, ids, "flock-1")
	if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), "d", []byte("task")); refusalOf(err) != wire.RefusedOverShare {
		t.Fatalf("the 4th task after the put-back: %v", err)
	}
}

// sharesBytesOf is agent's bytes in TASKS, summed from the stream.
func (s *Server) sharesBytesOf(t *testing.T, agent int) int64 {
	seqs, err := s.readTaskShares(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range seqs {
		if e.agent == agent {
			n += e.size
		}
	}
	return n
}

// The shares' bytes are the stream's: an orchestrator's share filled with
// tasks is what TASKS counts for them.
func TestTaskSizeIsTheStreams(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	s := startBus(t, ForFlock(twoSenders(), ids.keys()), Options{})
	o1 := connect(t, s, ids, "flock-1")
	op := connect(t, s, ids, creds.OperatorName)
	for i, p := range []string{"", "x", strings.Repeat("y", 1000)} {
		if _, err := sendAs(t, o1, 1, wire.RoleTasks("worker"), string(rune('a'+i)), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, _ := jetstream.New(op.Conn)
	st, err := js.Stream(ctx, wire.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.shares.of(1).bytes, int64(st.CachedInfo().State.Bytes); got != want {
		t.Errorf("agent 1's share counts %d bytes, TASKS %d", got, want)
	}
}

// What the desk refuses: a worker sending (only orchestrators do), a
// subject that is not one task subject, headers only the desk sets.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	s := startBus(t, ForFlock(twoSenders(), ids.keys()), Options{})
	w2, o1 := connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-1")
	if _, err := sendAs(t, w2, 2, wire.RoleTasks("worker"), "w", nil); refusalOf(err) != wire.RefusedNotSender {
		t.Errorf("a worker's send: %v", err)
	}
	for _, subj := range []string{"tasks", "tasks.>", "tasks.*.x", "task.result", "tasks..x", "agent.2.heartbeat"} {
		if _, err := sendAs(t, o1, 1, subj, "x", nil); refusalOf(err) != wire.RefusedMalformed {
			t.Errorf("a send on %q: %v, want malformed", subj, err)
		}
	}
	// A forged sender and JetStream's own headers do not reach the task.
	m := nats.NewMsg(wire.Desk(1, wire.DeskSend))
	m.Header.Set(wire.TaskSubjectHeader, wire.AgentTasks(4))
	m.Header.Set(wire.SenderHeader, "5")
	m.Header.Set("Nats-Rollup", "all")
	m.Header.Set("Nats-Expected-Stream", "RESULTS")
	m.Header.Set("Colour", "blue")
	if ans, err := o1.RequestMsg(m, 5*time.Second); err != nil || wire.ParseRefusal(ans.Header) != nil {
		t.Fatalf("a send with extra headers: %v, %+v", err, ans)
	}
	w4 := connect(t, s, ids, "flock-4")
	h, ok := ask(t, w4, 4, time.Second)
	if !ok {
		t.Fatal("no task")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, _ := jetstream.New(connect(t, s, ids, creds.OperatorName).Conn)
	st, _ := js.Stream(ctx, wire.TasksStream)
	raw, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get(wire.SenderHeader) != "1" || raw.Header.Get("Nats-Rollup") != "" || raw.Header.Get("Colour") != "blue" || h.Subject != wire.AgentTasks(4) {
		t.Errorf("the stored task's headers: %v", raw.Header)
	}
	if n := s.Status().Agents[1].ViolationsTotal; n != 6 {
		t.Errorf("agent 1's violations: %d, want the 6 malformed sends", n)
	}
}

// A task dead-lettered, or purged by the operator, frees its place too.
func TestTaskShareFreedByDeadLettersAndPurges(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, "flock-5")...)
	c := ForFlock(twoSenders(), ids.keys())
	c.Tasks.AckWait, c.Tasks.MaxDeliveries = time.Second, 1
	s := startBus(t, c, Options{})
	o1, w4 := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-4")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := sendAs(t, o1, 1, wire.AgentTasks(4), id, []byte("task")); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := ask(t, w4, 4, time.Second); !ok { // taken, never finished: dead after 1 delivery
		t.Fatal("no task")
	}
	waitForWithin(t, 20*time.Second, "the dead letter to free a place", func() bool { return s.shares.of(1).n == 2 })
	op := connect(t, s, ids, creds.OperatorName)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, _ := jetstream.New(op.Conn)
	st, _ := js.Stream(ctx, wire.TasksStream)
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sendAs(t, o1, 1, wire.AgentTasks(4), "d", nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e", "f"} {
		if _, err := sendAs(t, o1, 1, wire.AgentTasks(4), id, nil); err != nil {
			t.Fatalf("after a purge, task %s: %v", id, err)
		}
	}
}
