package bus

// Tier: unit (no root). The cost of each task on a real in-process bus:
// flock-proxy (played here by its bus user) asks the desk which tasks a
// worker holds and answers the desk what a task spent.

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// withProxy is everyoneAnd4 and flock-proxy's user.
var withProxy = append([]string{creds.ProxyName}, everyoneAnd4...)

// connectProxy connects as flock-proxy does: its answers under its own inbox.
func connectProxy(t *testing.T, s *Server, ids identities) *client {
	t.Helper()
	return connect(t, s, ids, creds.ProxyName, nats.CustomInboxPrefix(wire.ProxyInbox))
}

// sendBudget sends task id to subject as orchestrator 1 through the desk,
// with budget as its Flock-Task-Budget ("": none), and returns where it
// was stored or the desk's refusal.
func sendBudget(t *testing.T, o1 *client, subject, id, budget string) (wire.Sent, *wire.Refusal) {
	t.Helper()
	h, body := wire.SendMessage(subject, id, []byte(id))
	m := &nats.Msg{Subject: wire.Desk(1, wire.DeskSend), Header: h, Data: body}
	if budget != "" {
		m.Header.Set(wire.TaskBudgetHeader, budget)
	}
	ans, err := o1.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("sending task %s: %v", id, err)
	}
	if r := wire.ParseRefusal(ans.Header); r != nil {
		return wire.Sent{}, r
	}
	sent, err := wire.ParseSent(ans.Data)
	if err != nil {
		t.Fatalf("sending task %s: %v", id, err)
	}
	return sent, nil
}

// leasesOf asks the desk, as c, which tasks agent id holds.
func leasesOf(t *testing.T, c *client, id int) map[string]wire.Held {
	t.Helper()
	m, err := c.Request(wire.LeasesSubject(id), nil, 5*time.Second)
	if err != nil {
		t.Fatalf("asking the tasks agent %d holds: %v", id, err)
	}
	h, err := wire.ParseHeld(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.Held{}
	for _, task := range h.Tasks {
		out[task.ID] = task
	}
	return out
}

// The desk tells the proxy the tasks one agent holds, each with its own
// budget, and no other agent's; a task is gone from them once its result
// is stored or it is given back.
func TestDeskAnswersLeases(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, withProxy...)
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = time.Minute })
	proxy, o1 := connectProxy(t, s, ids), connect(t, s, ids, "flock-1")
	w2, w4 := connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4")
	sent, r := sendBudget(t, o1, wire.AgentTasks(2), "budgeted", "tokens=200000,usd=0.50")
	if r != nil {
		t.Fatalf("a task with a budget refused: %v", r)
	}
	if _, r := sendBudget(t, o1, wire.AgentTasks(4), "free", ""); r != nil {
		t.Fatalf("a task without a budget refused: %v", r)
	}
	h2, ok2 := ask(t, w2, 2, time.Second)
	h4, ok4 := ask(t, w4, 4, time.Second)
	if !ok2 || h2.ID != "budgeted" || !ok4 || h4.ID != "free" {
		t.Fatalf("handed %+v (%v) to worker 2 and %+v (%v) to worker 4", h2, ok2, h4, ok4)
	}

	got := leasesOf(t, proxy, 2)
	want := wire.TaskBudget{Tokens: 200000, USD: wire.USD / 2}
	if b := got["budgeted"]; len(got) != 1 || b.Agent != 2 || b.Seq != sent.Seq || b.Delivery != 1 || b.Budget == nil || *b.Budget != want {
		t.Errorf("worker 2 holds %+v, want task budgeted (seq %d) alone with budget %+v", got, sent.Seq, want)
	}
	if got := leasesOf(t, proxy, 4); len(got) != 1 || got["free"].Agent != 4 || got["free"].Budget != nil {
		t.Errorf("worker 4 holds %+v, want task free alone, no budget", got)
	}
	if got := leasesOf(t, proxy, 3); len(got) != 0 {
		t.Errorf("monitor 3 holds %+v", got)
	}

	if got := say(t, w2, 2, wire.DeskResult, h2.Lease, resultBody(wire.Result{OK: true})); got != "" {
		t.Fatalf("worker 2's result refused: %q", got)
	}
	if got := say(t, w4, 4, wire.DeskRelease, h4.Lease, nil); got != "" {
		t.Fatalf("worker 4's release refused: %q", got)
	}
	for _, id := range []int{2, 4} {
		if got := leasesOf(t, proxy, id); len(got) != 0 {
			t.Errorf("after its result or release, agent %d holds %+v", id, got)
		}
	}
}

// After a restart of the bus, a task the desk learns of again from its
// worker (its progress) is read back from the stream with its budget.
func TestDeskLeasesAfterARestart(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, withProxy...)
	dir := t.TempDir()
	long := func(c *Config) { c.Tasks.AckWait = time.Minute }
	s := taskBus(t, ids, Options{StoreDir: dir}, long)
	o1, w2 := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-2")
	if _, r := sendBudget(t, o1, wire.AgentTasks(2), "budgeted", "usd=2"); r != nil {
		t.Fatalf("send refused: %v", r)
	}
	h, ok := ask(t, w2, 2, time.Second)
	if !ok {
		t.Fatal("no task handed")
	}
	s.Shutdown()
	s = taskBus(t, ids, Options{StoreDir: dir}, long)
	proxy, w2 := connectProxy(t, s, ids), connect(t, s, ids, "flock-2")
	if got := say(t, w2, 2, wire.DeskProgress, h.Lease, nil); got != "" {
		t.Fatalf("worker 2's progress after the restart: %q", got)
	}
	if got := leasesOf(t, proxy, 2)["budgeted"]; got.Budget == nil || *got.Budget != (wire.TaskBudget{USD: 2 * wire.USD}) {
		t.Errorf("after the restart worker 2 holds %+v, want task budgeted with usd=2", got)
	}
}

// The stored result carries what the proxy answered for the task, never
// what the worker claimed; when the proxy does not answer it is stored
// without a spend, at once when no one listens, within the bound when
// the proxy is silent. /metrics adds up the spends stored.
func TestDeskStoresTheProxysSpend(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, withProxy...)
	// Worker 2 is granted model APIs; worker 4 none.
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = time.Minute; c.Tasks.Metered = []int{2} })
	proxy, o1, w2 := connectProxy(t, s, ids), connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-2")
	op := connect(t, s, ids, creds.OperatorName)
	t.Run("a worker without models: the proxy is not asked", func(t *testing.T) {
		asked := make(chan *nats.Msg, 4)
		sub, err := proxy.Subscribe(wire.TaskSpendSubjects, func(m *nats.Msg) { asked <- m })
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe(); _ = proxy.Flush() }()
		if err := proxy.Flush(); err != nil {
			t.Fatal(err)
		}
		w4 := connect(t, s, ids, "flock-4")
		if _, r := sendBudget(t, o1, wire.AgentTasks(4), "plain", ""); r != nil {
			t.Fatalf("send refused: %v", r)
		}
		h, ok := ask(t, w4, 4, time.Second)
		if !ok {
			t.Fatal("worker 4 was handed nothing")
		}
		start := time.Now()
		if got := say(t, w4, 4, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true})); got != "" {
			t.Fatalf("worker 4's result refused: %q", got)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("worker 4's result took %s to store", took)
		}
		if res := waitResults(t, op.Conn, 5*time.Second, "plain")["plain"]; len(res) != 1 || res[0].Spend != nil {
			t.Errorf("worker 4's result: %+v, want it stored without a spend", res)
		}
		select {
		case m := <-asked:
			t.Errorf("the proxy was asked %s for a worker granted no model", m.Subject)
		default:
		}
	})
	spent := wire.TaskSpend{Requests: 7, Tokens: wire.Tokens{InputTokens: 30000, OutputTokens: 1200, CacheReadTokens: 10000},
		Cost: 38 * wire.USD / 100, Budget: &wire.TaskBudget{USD: 3 * wire.USD / 10}, OutOfBudget: true}
	forged := &wire.TaskSpend{Requests: 1, Cost: 1}

	for _, tc := range []struct {
		name   string
		answer func(m *nats.Msg) // the proxy's; nil: no one listens
		want   *wire.TaskSpend
		within time.Duration
	}{
		{name: "the proxy answers", answer: func(m *nats.Msg) {
			b, _ := wire.EncodeTaskSpend(spent)
			_ = m.Respond(b)
		}, want: &spent, within: spendTimeout},
		{name: "the proxy answers nonsense", answer: func(m *nats.Msg) { _ = m.Respond([]byte("nonsense")) }, within: spendTimeout},
		{name: "no proxy listens", within: spendTimeout},
		{name: "the proxy is silent", answer: func(*nats.Msg) {}, within: spendTimeout + 5*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			sent, r := sendBudget(t, o1, wire.AgentTasks(2), id, "")
			if r != nil {
				t.Fatalf("send refused: %v", r)
			}
			asked := make(chan *nats.Msg, 4)
			if tc.answer != nil {
				sub, err := proxy.Subscribe(wire.TaskSpendSubjects, func(m *nats.Msg) { asked <- m; tc.answer(m) })
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = sub.Unsubscribe(); _ = proxy.Flush() }() // gone before the next case asks
				if err := proxy.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			h, ok := ask(t, w2, 2, time.Second)
			if !ok || h.ID != id {
				t.Fatalf("worker 2 was handed %+v (%v)", h, ok)
			}
			start := time.Now()
			if got := say(t, w2, 2, wire.DeskResult, h.Lease, resultBody(wire.Result{OK: true, Spend: forged})); got != "" {
				t.Fatalf("worker 2's result refused: %q", got)
			}
			if took := time.Since(start); took > tc.within {
				t.Errorf("the result took %s to store, want within %s", took, tc.within)
			}
			res := waitResults(t, op.Conn, 5*time.Second, id)[id]
			if len(res) != 1 || !reflect.DeepEqual(res[0].Spend, tc.want) {
				b, _ := json.Marshal(res)
				t.Errorf("stored %s, want spend %+v", b, tc.want)
			}
			if tc.answer == nil {
				return
			}
			select {
			case m := <-asked:
				q, err := wire.ParseTaskSpendRequest(m.Data)
				if m.Subject != wire.TaskSpendSubject(2) || err != nil || q != (wire.TaskSpendRequest{Seq: sent.Seq, Final: true}) {
					t.Errorf("the desk asked %s %q (%v), want the final spend of seq %d of agent 2", m.Subject, m.Data, err, sent.Seq)
				}
			default:
				t.Error("the desk did not ask the proxy")
			}
		})
	}
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := TaskSpendTotal{Cost: spent.Cost, Tokens: spent.Tokens.Total(), OutOfBudget: 1}
	if got := snap.Agents[2]; got.TaskSpend != want || got.TasksOK != 4 {
		t.Errorf("agent 2's counts %+v, want %d results and the one spend %+v", got, 4, want)
	}
}

// A send whose budget the workers could not read is refused, naming the
// header and how to write it; a good one is kept with the task.
func TestSendRefusesAMalformedBudget(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, nil)
	o1 := connect(t, s, ids, "flock-1")
	for _, tc := range []struct{ budget, refused string }{
		{"usd=abc", wire.RefusedMalformed},
		{"tokens=0", wire.RefusedMalformed},
		{"eur=1", wire.RefusedMalformed},
		{"tokens=5,tokens=6", wire.RefusedMalformed},
		{"usd=0.25", ""},
	} {
		_, r := sendBudget(t, o1, wire.RoleTasks("worker"), "b-"+tc.budget, tc.budget)
		switch {
		case tc.refused == "" && r != nil:
			t.Errorf("budget %q refused: %v", tc.budget, r)
		case tc.refused != "" && (r == nil || r.Kind != tc.refused || !strings.Contains(r.Reason, wire.TaskBudgetHeader) || !strings.Contains(r.Reason, "e.g.")):
			t.Errorf("budget %q: %+v, want %s naming %s and the fix", tc.budget, r, tc.refused, wire.TaskBudgetHeader)
		}
	}
	if n := s.Status().Agents[1].ViolationsTotal; n != 4 {
		t.Errorf("agent 1's violations: %d, want the 4 malformed sends", n)
	}
}

// flock-proxy's user asks the desk for leases and hears the questions of
// what a task spent; it may not ask the bus anything else, speak for the
// desk, nor hear another's inbox. (What agents may not do of it is in
// TestPermissionMatrix.)
func TestProxyPermissions(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, withProxy...)
	s := taskBus(t, ids, Options{}, nil)
	proxy, op := connectProxy(t, s, ids), connect(t, s, ids, creds.OperatorName)
	leasesOf(t, proxy, 2)
	heard, err := proxy.SubscribeSync(wire.TaskSpendSubjects)
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := op.Publish(wire.TaskSpendSubject(2), []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if m, err := heard.NextMsg(5 * time.Second); err != nil || m.Subject != wire.TaskSpendSubject(2) {
		t.Errorf("the proxy did not hear the operator's question: %v", err)
	}

	const refused = "Permissions Violation for "
	for _, subj := range []string{wire.HeldSubject, wire.Desk(2, wire.DeskResult), wire.ResultSubject} {
		if err := proxy.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
		proxy.waitErr(t, refused+`Publish to "`+subj+`"`)
	}
	for _, subj := range []string{"flock.bus.>", "_INBOX.>", wire.Inbox(2) + ".>", wire.DeskAll} {
		if _, err := proxy.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		proxy.waitErr(t, refused+`Subscription to "`+subj+`"`)
	}
}
