package bus

// Tier: unit (no root). The task desk against a real in-process server:
// workers 2 and 4 speak to it as flock-agent does, and as an attacker
// would.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// violations records what the desk reported.
type violations struct {
	mu  sync.Mutex
	got []string // "agent kind"
}

func (v *violations) report(agent int, kind, _ string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.got = append(v.got, fmt.Sprintf("flock-%d %s", agent, kind))
}

func (v *violations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.got)
}

// expect waits until want were reported (in any order), and checks no
// others were.
func (v *violations) expect(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := v.list()
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("violations reported %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ask asks the desk as c (agent id) for a task, waiting up to wait.
func ask(t *testing.T, c *client, id int, wait time.Duration) (wire.Handed, bool) {
	t.Helper()
	body, _ := json.Marshal(wire.NextRequest{WaitMS: wait.Milliseconds()})
	m, err := c.Request(wire.Desk(id, wire.DeskNext), body, wait+5*time.Second)
	if err != nil {
		t.Fatalf("agent %d asking for a task: %v", id, err)
	}
	h, ok, err := wire.ParseHanded(m.Header, m.Data)
	if err != nil {
		t.Fatalf("agent %d asking for a task: %v", id, err)
	}
	return h, ok
}

// say sends verb with lease as c (agent id) and returns the desk's refusal kind, "" if none.
func say(t *testing.T, c *client, id int, verb, lease string, body []byte) string {
	t.Helper()
	m := nats.NewMsg(wire.Desk(id, verb))
	if lease != "" {
		m.Header.Set(wire.LeaseHeader, lease)
	}
	m.Data = body
	ans, err := c.RequestMsg(m, 15*time.Second)
	if err != nil {
		t.Fatalf("agent %d %s: %v", id, verb, err)
	}
	if r := wire.ParseRefusal(ans.Header); r != nil {
		return r.Kind
	}
	return ""
}

func resultBody(r wire.Result) []byte {
	b, _ := json.Marshal(r)
	return b
}

// A worker cannot store a result for a task it never held: not with no
// lease, not with another worker's, not with one it made up, and not
// around the desk on task.result (a guessed id cannot pre-empt the real
// result). Each is refused and reported naming it; the holder's result is
// stored once, with the task's own id and the holder's id whatever its
// body claims.
func TestDeskBindsResultsToTheDelivery(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	var v violations
	s := taskBus(t, ids, Options{Violation: v.report}, nil)
	op, w2, w4 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	h, ok := ask(t, w4, 4, time.Second)
	if !ok || h.ID != "t-1" || h.Delivery != 1 || string(h.Payload) != "work" || h.Subject != wire.RoleTasks("worker") {
		t.Fatalf("worker 4 was handed %+v (%v)", h, ok)
	}
	if _, ok := ask(t, w2, 2, 50*time.Millisecond); ok {
		t.Fatal("worker 2 was handed a task too")
	}
	ack, _, _ := strings.Cut(h.Lease, ".")
	made := ack + "." + base64.RawURLEncoding.EncodeToString(make([]byte, leaseMACSize))
	forged := wire.Result{TaskID: "t-1", Agent: 4, OK: true, Output: "forged"}
	for _, tc := range []struct {
		name, lease, want string
	}{
		{"no lease", "", wire.RefusedMalformed},
		{"another worker's lease", h.Lease, wire.RefusedForged},
		{"a lease made up for the delivery", made, wire.RefusedForged},
	} {
		if got := say(t, w2, 2, wire.DeskResult, tc.lease, resultBody(forged)); got != tc.want {
			t.Errorf("%s: the desk answered %q, want %q", tc.name, got, tc.want)
		}
	}
	// Around the desk: the server refuses it (a permission violation).
	pre := nats.NewMsg(wire.ResultSubject)
	pre.Header.Set(wire.MsgIDHeader, wire.ResultMsgID("t-1"))
	pre.Data = resultBody(forged)
	if err := w2.PublishMsg(pre); err != nil {
		t.Fatal(err)
	}
	w2.waitErr(t, `Permissions Violation for Publish to "task.result"`)
	// Nor can it end the holder's delivery.
	if got := say(t, w2, 2, wire.DeskRelease, h.Lease, nil); got != wire.RefusedForged {
		t.Errorf("worker 2 releasing worker 4's task: %q, want %q", got, wire.RefusedForged)
	}
	// The holder's result is the one stored, as its own, under the task's id.
	if got := say(t, w4, 4, wire.DeskResult, h.Lease, resultBody(wire.Result{TaskID: "other", Agent: 2, OK: true, Output: "real"})); got != "" {
		t.Fatalf("worker 4's result refused: %s", got)
	}
	res := waitResults(t, op.Conn, 5*time.Second, "t-1")
	if len(res) != 1 || len(res["t-1"]) != 1 || res["t-1"][0].Output != "real" || res["t-1"][0].Agent != 4 {
		t.Errorf("stored results %+v, want one: worker 4's", res)
	}
	waitEmpty(t, op.Conn)
	// Handing it in again (its answer lost) is not a second result.
	if got := say(t, w4, 4, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Output: "again"})); got != "" {
		t.Errorf("worker 4 handing its result in again: %q", got)
	}
	if n := streamMsgs(t, op.Conn, wire.ResultsStream); n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
	v.expect(t, "flock-2 malformed", "flock-2 forged-lease", "flock-2 forged-lease", "flock-2 forged-lease")
}

// A lease is good only while its delivery is the task's latest: once the
// task went to another worker (the first was silent past the ack wait),
// the first one's progress and result are refused and reported, and the
// second one's result is the one stored.
func TestDeskRefusesALeaseOvertaken(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	var v violations
	s := taskBus(t, ids, Options{Violation: v.report}, nil)
	op, w2, w4 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	send(t, op.Conn, wire.RoleTasks("worker"), "slow", "work")
	first, ok := ask(t, w2, 2, time.Second)
	if !ok || first.ID != "slow" {
		t.Fatalf("worker 2 was handed %+v (%v)", first, ok)
	}
	second, ok := ask(t, w4, 4, 10*time.Second) // after the ack wait (1 s)
	if !ok || second.ID != "slow" || second.Delivery != 2 {
		t.Fatalf("worker 4 was handed %+v (%v), want the task's second delivery", second, ok)
	}
	if st := s.Status(); st.Agents[4].Holding != 1 || st.Agents[2].Holding != 0 {
		t.Errorf("status: agent 4 holds %d, agent 2 %d; want 1 and 0", st.Agents[4].Holding, st.Agents[2].Holding)
	}
	for _, verb := range []string{wire.DeskProgress, wire.DeskResult, wire.DeskRelease} {
		if got := say(t, w2, 2, verb, first.Lease, resultBody(wire.Result{OK: true, Output: "late"})); got != wire.RefusedStale {
			t.Errorf("worker 2's %s with its overtaken lease: %q, want %q", verb, got, wire.RefusedStale)
		}
	}
	if got := say(t, w4, 4, wire.DeskProgress, second.Lease, nil); got != "" {
		t.Errorf("worker 4's progress: %q", got)
	}
	if got := say(t, w4, 4, wire.DeskResult, second.Lease, resultBody(wire.Result{OK: true, Output: "current"})); got != "" {
		t.Fatalf("worker 4's result refused: %q", got)
	}
	res := waitResults(t, op.Conn, 5*time.Second, "slow")
	if len(res["slow"]) != 1 || res["slow"][0].Output != "current" || res["slow"][0].Agent != 4 {
		t.Errorf("stored %+v, want worker 4's result alone", res["slow"])
	}
	v.expect(t, "flock-2 stale-lease", "flock-2 stale-lease", "flock-2 stale-lease")
}

// The desk answers only to the asking agent's own inbox: an ask whose
// answer would go to another agent's inbox (or one that merely starts
// like its own) is not answered, takes no task, and is reported.
func TestDeskAnswersOnlyTheAgentsOwnInbox(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	var v violations
	s := taskBus(t, ids, Options{Violation: v.report}, nil)
	op, w2, w4 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	heard, err := w4.SubscribeSync(wire.Inbox(4) + ".>")
	if err != nil {
		t.Fatal(err)
	}
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	for _, reply := range []string{wire.Inbox(4) + ".stolen", wire.Inbox(22) + ".x", "agent.4.task.result"} {
		body, _ := json.Marshal(wire.NextRequest{WaitMS: 100})
		if err := w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: reply, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	v.expect(t, "flock-2 foreign-reply", "flock-2 foreign-reply", "flock-2 foreign-reply")
	if m, err := heard.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("worker 4's inbox heard %q %v", m.Data, m.Header)
	}
	// The task was taken by none of them: the next ask gets its first delivery.
	if h, ok := ask(t, w4, 4, time.Second); !ok || h.ID != "t-1" || h.Delivery != 1 {
		t.Errorf("worker 4 was handed %+v (%v), want t-1's first delivery", h, ok)
	}
}

// Every ask gets exactly one answer: none when it expires or is
// withdrawn, the task when one comes while it waits; a task whose asker
// went away is kept for the next.
func TestDeskAnswersEveryAskOnce(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	// A spare is kept for a third of the ack wait: long enough for a
	// loaded machine to ask again.
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = 30 * time.Second })
	op, w2 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2")
	start := time.Now()
	if _, ok := ask(t, w2, 2, 200*time.Millisecond); ok || time.Since(start) < 200*time.Millisecond {
		t.Errorf("an ask with nothing queued: handed %v after %s", ok, time.Since(start))
	}
	// One agent's asks are bounded: the ninth at once is refused. They
	// wait long enough that none expires before the ninth is read, however
	// slow the machine, and are then withdrawn: each answered once.
	var many []*nats.Subscription
	for range maxAsksPerAgent + 1 {
		sub, _ := w2.SubscribeSync(w2.NewInbox())
		many = append(many, sub)
		body, _ := json.Marshal(wire.NextRequest{WaitMS: 20000})
		_ = w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: sub.Subject, Data: body})
	}
	for _, sub := range many {
		withdraw, _ := json.Marshal(wire.NextRequest{Withdraw: sub.Subject})
		if _, err := w2.Request(wire.Desk(2, wire.DeskNext), withdraw, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	refusedAsks := 0
	for _, sub := range many {
		m, err := sub.NextMsg(3 * time.Second)
		if err != nil {
			t.Fatalf("an ask was not answered: %v", err)
		}
		if r := wire.ParseRefusal(m.Header); r != nil && r.Kind == wire.RefusedTooMany {
			refusedAsks++
		}
	}
	if refusedAsks != 1 {
		t.Errorf("%d of %d asks at once refused, want 1", refusedAsks, maxAsksPerAgent+1)
	}
	// Withdrawn: answered at once, with nothing.
	inbox := w2.NewInbox()
	answers, _ := w2.SubscribeSync(inbox)
	body, _ := json.Marshal(wire.NextRequest{WaitMS: 20000})
	_ = w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: inbox, Data: body})
	withdraw, _ := json.Marshal(wire.NextRequest{Withdraw: inbox})
	if _, err := w2.Request(wire.Desk(2, wire.DeskNext), withdraw, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	m, err := answers.NextMsg(2 * time.Second)
	if err != nil {
		t.Fatalf("a withdrawn ask was not answered: %v", err)
	}
	if _, ok, _ := wire.ParseHanded(m.Header, m.Data); ok {
		t.Error("a withdrawn ask was handed a task")
	}
	if m, err := answers.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("a second answer: %v", m.Header)
	}
	for _, sub := range many {
		if n, _, _ := sub.Pending(); n != 0 {
			t.Errorf("%d more answers to one of the asks at once", n)
		}
	}
	// Waiting when the task comes.
	got := make(chan wire.Handed, 1)
	go func() { h, _ := ask(t, w2, 2, 5*time.Second); got <- h }()
	waitFor(t, "agent 2's ask waiting in the status", func() bool { return s.Status().Agents[2].Waiting == 1 })
	send(t, op.Conn, wire.AgentTasks(2), "mine", "x")
	h := <-got
	if h.ID != "mine" {
		t.Errorf("the waiting ask got %+v", h)
	}
	if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true})); got != "" {
		t.Fatalf("the result refused: %q", got)
	}
	// An asker that went: its task waits for the next ask.
	gone := w2.NewInbox()
	sub, _ := w2.SubscribeSync(gone)
	body, _ = json.Marshal(wire.NextRequest{WaitMS: 3000})
	_ = w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: gone, Data: body})
	_ = w2.Flush()
	_ = sub.Unsubscribe()
	_ = w2.Flush()
	send(t, op.Conn, wire.RoleTasks("worker"), "spare", "x")
	if h, ok := ask(t, w2, 2, 2*time.Second); !ok || h.ID != "spare" || h.Delivery != 1 {
		t.Errorf("the next ask got %+v (%v), want the spare task's first delivery", h, ok)
	}
}

// An ask the desk reads after its asker went (its request timed out, the
// agent was killed: nothing listens on its reply any more) is not handed
// the spare task: the spare waits for the next ask that is heard, instead
// of the ack wait.
func TestDeskHandsNoSpareToAnAskNoOneHears(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = 30 * time.Second })
	op, w2 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2")
	// A spare: its asker went while it waited.
	gone := w2.NewInbox()
	sub, _ := w2.SubscribeSync(gone)
	body, _ := json.Marshal(wire.NextRequest{WaitMS: 10000})
	_ = w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: gone, Data: body})
	waitFor(t, "agent 2's ask waiting in the status", func() bool { return s.Status().Agents[2].Waiting == 1 })
	_ = sub.Unsubscribe()
	_ = w2.Flush()
	send(t, op.Conn, wire.RoleTasks("worker"), "spare", "x")
	waitFor(t, "the task kept as a spare", func() bool {
		s.desk.mu.Lock()
		defer s.desk.mu.Unlock()
		return len(s.desk.spares[wire.RoleConsumer("worker")]) == 1
	})
	// An ask no one hears any more (never subscribed), read before the next.
	_ = w2.PublishMsg(&nats.Msg{Subject: wire.Desk(2, wire.DeskNext), Reply: wire.Inbox(2) + ".gone", Data: body})
	if h, ok := ask(t, w2, 2, 2*time.Second); !ok || h.ID != "spare" || h.Delivery != 1 {
		t.Errorf("the next ask got %+v (%v), want the spare task's first delivery", h, ok)
	}
	if n := s.Status().Agents[2].Holding; n != 1 {
		t.Errorf("agent 2 holds %d tasks, want 1", n)
	}
}

// Leases outlive a restart of the bus: the key is kept in the store
// directory (0600), and a result handed in after the restart with a
// lease from before is stored; a made-up one is still refused.
func TestDeskLeasesOutliveARestart(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	dir := t.TempDir()
	var v violations
	long := func(c *Config) { c.Tasks.AckWait = time.Minute }
	s := taskBus(t, ids, Options{StoreDir: dir, Violation: v.report}, long)
	op, w2 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2")
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	h, ok := ask(t, w2, 2, time.Second)
	if !ok {
		t.Fatal("no task handed")
	}
	s.Shutdown()
	fi, err := os.Stat(filepath.Join(dir, leaseKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != leaseKeySize {
		t.Fatalf("the lease key: %v %v", fi, err)
	}
	s = taskBus(t, ids, Options{StoreDir: dir, Violation: v.report}, long)
	op, w2, w4 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	if got := say(t, w4, 4, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Output: "forged"})); got != wire.RefusedForged {
		t.Errorf("worker 4 with worker 2's lease after the restart: %q", got)
	}
	if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Output: "after"})); got != "" {
		t.Fatalf("the result with a lease from before the restart: refused %q", got)
	}
	res := waitResults(t, op.Conn, 5*time.Second, "t-1")
	if len(res["t-1"]) != 1 || res["t-1"][0].Output != "after" || res["t-1"][0].Agent != 2 {
		t.Errorf("stored %+v", res["t-1"])
	}
	waitEmpty(t, op.Conn)
	v.expect(t, "flock-4 forged-lease")
}

// One agent's bad requests are counted each, and logged at most once a
// minute per kind with the count of those not logged.
func TestDeskViolationsAreCountedNotFlooded(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	logs := &strings.Builder{}
	var mu sync.Mutex
	s := taskBus(t, ids, Options{Log: lockedWriter{&mu, logs}}, nil)
	w2 := connect(t, s, ids, "flock-2")
	for range 50 {
		say(t, w2, 2, wire.DeskResult, "bm90.aGVsbG8", nil)
	}
	if a := s.Status().Agents[2]; a.ViolationsTotal != 50 || a.Violations[wire.ViolationForgedLease] != 50 {
		t.Errorf("violations of agent 2: %d %v, want 50 forged-lease", a.ViolationsTotal, a.Violations)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "forged-lease violation"); n != 1 {
		t.Errorf("%d log lines about them, want 1:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The operator asks the desk which worker holds a running task: the one
// it was handed to, until its result is stored; ListTasks (flockctl
// tasks) shows it as the holder.
func TestDeskSaysWhoHoldsATask(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = time.Minute })
	op, w2 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2")
	holders := func() map[string]int {
		t.Helper()
		entries, err := operator.ListTasks(context.Background(), op.Conn, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, e := range entries {
			got[string(e.State)+" "+e.ID] = e.Holder
		}
		return got
	}
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	if got := holders(); !maps.Equal(got, map[string]int{"pending t-1": 0}) {
		t.Errorf("before it is handed out: %v", got)
	}
	h, ok := ask(t, w2, 2, time.Second)
	if !ok {
		t.Fatal("no task handed")
	}
	asked := func() (wire.HeldTasks, error) {
		t.Helper()
		m, err := op.Request(wire.HeldSubject, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return wire.ParseHeld(m.Data)
	}
	held, err := asked()
	if err != nil || len(held.Tasks) != 1 || held.Tasks[0].Agent != 2 || held.Tasks[0].ID != "t-1" || held.Tasks[0].Delivery != 1 || held.Tasks[0].DeliveredAt.IsZero() {
		t.Errorf("the desk says it holds %+v (%v), want t-1 by agent 2, first delivery", held, err)
	}
	if got := holders(); !maps.Equal(got, map[string]int{"running t-1": 2}) {
		t.Errorf("in worker 2's hands: %v", got)
	}
	if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true})); got != "" {
		t.Fatalf("worker 2's result refused: %q", got)
	}
	waitEmpty(t, op.Conn)
	if got := holders(); !maps.Equal(got, map[string]int{"done t-1": 0}) {
		t.Errorf("after its result: %v", got)
	}
	if held, err := asked(); err != nil || len(held.Tasks) != 0 {
		t.Errorf("after its result the desk says it holds %+v (%v)", held, err)
	}
}

// A task given back stays given back across a restart of the bus: the
// worker that released it cannot store its result with the old lease
// after the restart, before or after the task is handed out again
// (stale-lease), and the next holder's result is the one stored.
func TestDeskReleaseOutlivesARestart(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	dir := t.TempDir()
	var v violations
	s := taskBus(t, ids, Options{StoreDir: dir, Violation: v.report}, nil)
	op, w2 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2")
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	h, ok := ask(t, w2, 2, time.Second)
	if !ok {
		t.Fatal("no task handed")
	}
	if got := say(t, w2, 2, wire.DeskRelease, h.Lease, nil); got != "" {
		t.Fatalf("worker 2's release refused: %q", got)
	}
	s.Shutdown()
	s = taskBus(t, ids, Options{StoreDir: dir, Violation: v.report}, nil)
	op, w2, w4 := connect(t, s, ids, creds.OperatorName), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Output: "given back"})); got != wire.RefusedStale {
		t.Errorf("worker 2's result with the lease it gave back, after the restart: %q, want %q", got, wire.RefusedStale)
	}
	again, ok := ask(t, w4, 4, 10*time.Second) // JetStream hands it out again after the ack wait (1 s)
	if !ok || again.ID != "t-1" || again.Delivery != 2 {
		t.Fatalf("worker 4 was handed %+v (%v), want t-1's second delivery", again, ok)
	}
	if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Output: "given back"})); got != wire.RefusedStale {
		t.Errorf("worker 2's result with the lease it gave back, handed out again: %q, want %q", got, wire.RefusedStale)
	}
	if got := say(t, w4, 4, wire.DeskResult, again.Lease, resultBody(wire.Result{OK: true, Output: "current"})); got != "" {
		t.Fatalf("worker 4's result refused: %q", got)
	}
	res := waitResults(t, op.Conn, 5*time.Second, "t-1")
	if len(res["t-1"]) != 1 || res["t-1"][0].Output != "current" || res["t-1"][0].Agent != 4 {
		t.Errorf("stored %+v, want worker 4's result alone", res["t-1"])
	}
	v.expect(t, "flock-2 stale-lease", "flock-2 stale-lease")
}
