package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// Leases says which tasks an agent holds now: the task desk's answer,
// asked over the bus (flock-proxy's), a fake in tests.
type Leases interface {
	Held(agent int) ([]wire.Held, error)
}

// taskRef is the task a request is charged to: its place in the tasks'
// stream, its id, and the budget its requests are held to (its worker's
// and its own, the smaller of each).
type taskRef struct {
	seq    uint64
	id     string
	budget wire.TaskBudget
}

// Reasons a request's task is refused (the journal's REASON=).
const (
	// ReasonNotHeld: the request names a task its agent does not hold.
	ReasonNotHeld = "task-not-held"
	// ReasonWhichTask: its agent holds several tasks and it names none.
	ReasonWhichTask = "task-not-named"
	// ReasonNoLeases: the desk did not say which tasks its agent holds,
	// and a budget of its tasks applies.
	ReasonNoLeases = "tasks-unknown"
)

// taskOf is the task a request of agent a is for: the one it holds, or
// the one TaskHeader names among those. nil: none (not a worker, or it
// holds none). false: refused, and answered. The header never reaches
// the provider.
func (g *Gateway) taskOf(w http.ResponseWriter, r *http.Request, a Agent, provider string, kind *modelapi.Kind) (*taskRef, bool) {
	named := r.Header.Get(wire.TaskHeader)
	r.Header.Del(wire.TaskHeader)
	if !a.Worker || g.Leases == nil {
		if named != "" {
			g.refuse(w, a.ID, provider, kind, ReasonNotHeld, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d takes no tasks, and the request names task %s (%s); remove the header", a.ID, quoted(named), wire.TaskHeader), 0)
			return nil, false
		}
		return nil, true
	}
	held, err := g.Leases.Held(a.ID)
	if err != nil {
		if named == "" && !a.TaskBudget.Any() {
			// No budget to hold it to: the request goes, charged to
			// no task (its agent's counts have it all the same).
			g.logf("gateway: agent %d's request is charged to no task: %v", a.ID, err)
			return nil, true
		}
		g.refuse(w, a.ID, provider, kind, ReasonNoLeases, http.StatusServiceUnavailable, fmt.Sprintf("flock proxy: agent %d: cannot tell which task this request is for, and its tasks' budget applies (the task desk did not answer: %v); retry", a.ID, err), time.Second)
		return nil, false
	}
	var t *wire.Held
	switch {
	case named != "":
		for i := range held {
			if held[i].ID == named {
				t = &held[i]
			}
		}
		if t == nil {
			g.refuse(w, a.ID, provider, kind, ReasonNotHeld, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d holds no task %s (%s); it %s", a.ID, quoted(named), wire.TaskHeader, heldLine(held)), 0)
			return nil, false
		}
	case len(held) == 0:
		return nil, true
	case len(held) == 1:
		t = &held[0]
	default:
		g.refuse(w, a.ID, provider, kind, ReasonWhichTask, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d %s: say which this request is for with the header %s: <task id>", a.ID, heldLine(held), wire.TaskHeader), 0)
		return nil, false
	}
	ref := &taskRef{seq: t.Seq, id: t.ID, budget: a.TaskBudget}
	if t.Budget != nil {
		ref.budget = ref.budget.Within(*t.Budget)
	}
	return ref, true
}

// heldLine names the tasks an agent holds.
func heldLine(held []wire.Held) string {
	if len(held) == 0 {
		return "holds none"
	}
	ids := make([]string, len(held))
	for i, h := range held {
		ids[i] = quoted(h.ID)
	}
	return "holds tasks " + strings.Join(ids, ", ")
}

// taskScope is the scope of t's budget.
func (g *Gateway) taskScope(t *taskRef) scope {
	return scope{id: scopeID{task: t.seq}, task: t, used: func() (wire.Spend, wire.Spend) {
		s := g.Store.Task(t.seq)
		sp := wire.Spend{Tokens: s.Tokens.Total(), Cost: s.Cost}
		return sp, sp
	}}
}

// flights are the requests under way of each task, so that the spend
// stored with a task's result waits for the last of them.
type flights struct {
	mu sync.Mutex
	n  map[uint64]int
	// idle is closed when a task's last request under way ends.
	idle map[uint64]chan struct{}
}

func (f *flights) begin(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n, f.idle = map[uint64]int{}, map[uint64]chan struct{}{}
	}
	if f.n[seq] == 0 {
		f.idle[seq] = make(chan struct{})
	}
	f.n[seq]++
}

func (f *flights) end(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[seq]--; f.n[seq] <= 0 {
		close(f.idle[seq])
		delete(f.n, seq)
		delete(f.idle, seq)
	}
}

// wait returns when no request of the task is under way, or after d.
func (f *flights) wait(seq uint64, d time.Duration) bool {
	f.mu.Lock()
	ch := f.idle[seq]
	f.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// finalWait bounds how long the spend of a task being finished waits for
// its requests under way: a worker hands in its result once it has its
// answers, so they are ending, not starting.
const finalWait = 2 * time.Second

// TaskSpend is what the task at seq in the tasks' stream spent here.
// final: its result is being stored; its requests under way end first
// (finalWait at most), and it is then kept only a while.
func (g *Gateway) TaskSpend(seq uint64, final bool) wire.TaskSpend {
	if final {
		if !g.flights.wait(seq, finalWait) {
			g.logf("gateway: task at %d still has requests under way after %s: its result's spend leaves them out", seq, finalWait)
		}
		g.Store.TaskDone(seq, g.now())
		g.limiter.forget(scopeID{task: seq})
	}
	return g.Store.Task(seq)
}
