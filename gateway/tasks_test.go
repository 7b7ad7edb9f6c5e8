package gateway

// Tier: unit. The cost of each task: a worker's requests are charged to
// the task it holds (the desk's answer, a fake here), to the one it names
// when it holds several; the sum over its tasks is what it spent; a
// task's budget is a ceiling its requests never pass, even all at once;
// and the spend stored with a result waits for the task's last request.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// fakeLeases is the desk: which tasks each agent holds, as the test sets.
type fakeLeases struct {
	mu    sync.Mutex
	held  map[int][]wire.Held
	err   error
	asked int
}

func (f *fakeLeases) Held(agent int) ([]wire.Held, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	return append([]wire.Held(nil), f.held[agent]...), f.err
}

func (f *fakeLeases) set(agent int, tasks ...wire.Held) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = map[int][]wire.Held{}
	}
	f.held[agent] = tasks
}

// workers is agent A a worker of anth (with budget b) and B a monitor.
func workers(b wire.TaskBudget) map[uint32]Agent {
	g := map[string]spec.Grant{"anth": {Provider: "anth"}}
	return map[uint32]Agent{uidA: {ID: idA, Grants: g, Worker: true, TaskBudget: b}, uidB: {ID: idB, Grants: g}}
}

// sonnetReq asks the priced model for a few words.
func sonnetReq(maxTokens int) string {
	return fmt.Sprintf(`{"model":"%s-20250929","max_tokens":%d,"messages":[{"role":"user","content":"a few words, on a prompt long enough to read some of it from the cache"}]}`, sonnet, maxTokens)
}

func taskRig(t *testing.T, b wire.TaskBudget) (*rig, *fakeLeases) {
	r := newRig(t, workers(b))
	l := &fakeLeases{}
	r.g.Leases = l
	return r, l
}

// totalOf is what agent id spent, every provider.
func (r *rig) totalOf(id int) (wire.Tokens, wire.PicoUSD) {
	var t wire.Tokens
	var c wire.PicoUSD
	for _, u := range r.g.Store.Usage(id) {
		t.Add(u.Tokens)
		c += u.Cost
	}
	return t, c
}

func TestGatewayChargesEachRequestToTheTaskItsWorkerHolds(t *testing.T) {
	r, l := taskRig(t, wire.TaskBudget{})
	sonnetPrice(t)
	// Three tasks in turn, a few requests each (one a stream, one to
	// count tokens), and the sum over them is the agent's total.
	for i, task := range []wire.Held{{Seq: 7, ID: "job-1", Agent: idA}, {Seq: 9, ID: "job-2", Agent: idA}, {Seq: 12, ID: "job-3", Agent: idA}} {
		l.set(idA, task)
		for j := range 2 + i {
			body := sonnetReq(50)
			if j == 1 {
				body = strings.Replace(body, `"max_tokens":50`, `"max_tokens":50,"stream":true`, 1)
			}
			if status, _, b := r.call(uidA, http.MethodPost, "/anth/v1/messages", body, "X-Standin-Words", fmt.Sprint(3+j)); status != 200 {
				t.Fatalf("task %s, request %d: %d %s", task.ID, j, status, b)
			}
		}
		if status, _, b := r.call(uidA, http.MethodPost, "/anth/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
			t.Fatalf("count_tokens: %d %s", status, b)
		}
	}
	var tokens wire.Tokens
	var cost wire.PicoUSD
	var requests uint64
	for seq, want := range map[uint64]uint64{7: 3, 9: 4, 12: 5} {
		s := r.g.TaskSpend(seq, true)
		if s.Requests != want || s.Cost == 0 || s.Tokens.Total() == 0 || s.OutOfBudget || s.Budget != nil {
			t.Errorf("task at %d: %+v, want %d requests with tokens and a cost, no budget", seq, s, want)
		}
		tokens.Add(s.Tokens)
		cost += s.Cost
		requests += s.Requests
	}
	at, ac := r.totalOf(idA)
	if tokens != at || cost != ac {
		t.Errorf("the sum over the tasks is %+v, %s; the agent's total %+v, %s: they must be equal", tokens, cost, at, ac)
	}
	t.Logf("three tasks, %d requests: %d tokens, %s, equal to the agent's total", requests, tokens.Total(), cost)
	// Held nothing: charged to no task, counted for the agent.
	l.set(idA)
	if status, _, b := r.call(uidA, http.MethodPost, "/anth/v1/messages", sonnetReq(50)); status != 200 {
		t.Fatalf("holding no task: %d %s", status, b)
	}
	eventually(t, func() error {
		if n := r.g.Store.Usage(idA)["anth"].Requests; n != requests+1 {
			return errorf("agent 1 has %d requests counted, want %d", n, requests+1)
		}
		return nil
	})
	if s := r.g.TaskSpend(12, false); s.Requests != 5 {
		t.Errorf("a request made holding no task was charged to the last one: %+v", s)
	}
	// A monitor's requests are never asked about.
	asked := l.asked
	if status, _, b := r.call(uidB, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Fatalf("the monitor: %d %s", status, b)
	}
	if l.asked != asked {
		t.Errorf("the desk was asked about a monitor's request")
	}
}

func TestGatewayTaskHeaderChoosesAmongTheTasksHeld(t *testing.T) {
	r, l := taskRig(t, wire.TaskBudget{})
	l.set(idA, wire.Held{Seq: 3, ID: "a-1", Agent: idA}, wire.Held{Seq: 4, ID: "a-2", Agent: idA})
	for _, tc := range []struct {
		name    string
		uid     uint32
		header  string // "": none
		status  int
		message string
	}{
		{"several held, none named", uidA, "", 400, `flock proxy: agent 1 holds tasks "a-1", "a-2": say which this request is for with the header Flock-Task: <task id>`},
		{"one not held", uidA, "b-9", 403, `flock proxy: agent 1 holds no task "b-9" (Flock-Task); it holds tasks "a-1", "a-2"`},
		{"named by a non-worker", uidB, "a-1", 403, `flock proxy: agent 2 takes no tasks, and the request names task "a-1" (Flock-Task); remove the header`},
		{"the second named", uidA, "a-2", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.header != "" {
				h = []string{wire.TaskHeader, tc.header}
			}
			status, hdr, body := r.call(tc.uid, http.MethodPost, "/anth/v1/messages", anthropicReq, h...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if tc.message != "" {
				if m := errorMessage(t, body); m != tc.message {
					t.Errorf("message:\n got %q\nwant %q", m, tc.message)
				}
				if hdr.Get("X-Flock-Proxy") != "refused" {
					t.Error("a refusal without X-Flock-Proxy: refused")
				}
			}
		})
	}
	// The named one was charged (the stand-in refuses a request that
	// still carries flock's header: it was dropped on the way).
	if a1, a2 := r.g.TaskSpend(3, true), r.g.TaskSpend(4, true); a1.Requests != 0 || a2.Requests != 1 {
		t.Errorf("a-1 %+v, a-2 %+v: want the one request charged to a-2", a1, a2)
	}
}

func TestGatewayWhenTheDeskDoesNotAnswer(t *testing.T) {
	r, l := taskRig(t, wire.TaskBudget{})
	l.err = errors.New("nats: no responders available for request")
	if status, _, b := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Errorf("no budget applies: the request should go, charged to no task; got %d %s", status, b)
	}
	r.g.SetPolicy(r.policy(workers(wire.TaskBudget{Tokens: 1000})), r.secrets)
	status, hdr, b := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq)
	if status != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(errorMessage(t, b), "cannot tell which task this request is for, and its tasks' budget applies") {
		t.Errorf("a budget applies: %d (Retry-After %q) %s; want a 503 to retry", status, hdr.Get("Retry-After"), b)
	}
}

// A task's budget is a ceiling: sixteen requests of the task at once,
// each asking for more output than is left, spend no more than it; the
// refusal is a 429 naming the task that the SDKs do not retry, and the
// task's spend says it ran out of its budget, after a restart too.
func TestGatewayTaskBudgetIsACeiling(t *testing.T) {
	price := sonnetPrice(t)
	// The worker's budget, and the task's own, smaller: the smaller
	// applies. Room for a few requests of up to 400 tokens of output.
	budget := price.Most(200, 400) * 5
	r, l := taskRig(t, wire.TaskBudget{USD: 2 * budget})
	l.set(idA, wire.Held{Seq: 21, ID: "job-budget", Agent: idA, Budget: &wire.TaskBudget{USD: budget, Tokens: 1 << 40}})
	statuses := map[int]int{}
	var mu sync.Mutex
	var refusal, shouldRetry string
	for round := range 3 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/anth/v1/messages", strings.NewReader(sonnetReq(400)))
				req.Header.Set("X-Standin-Words", "300")
				resp, err := r.client(uidA).Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == 429 && refusal == "" {
					refusal, shouldRetry = errorMessage(t, string(b)), resp.Header.Get("X-Should-Retry")
				}
			}()
		}
		wg.Wait()
		t.Logf("round %d: statuses so far %v", round, statuses)
	}
	s := r.g.TaskSpend(21, true)
	if s.Cost > budget || s.Cost == 0 {
		t.Errorf("the task spent %s against its budget %s: a ceiling, not a trip wire", s.Cost, budget)
	}
	if statuses[200] == 0 || statuses[429] == 0 || statuses[200]+statuses[429] != 48 {
		t.Errorf("statuses %v: want some let through, the rest 429", statuses)
	}
	if want := `flock proxy: agent 1: task "job-budget" is out of its budget task_usd=` + budget.String(); !strings.HasPrefix(refusal, want) || !strings.Contains(refusal, "its result says it ran out of budget") {
		t.Errorf("the refusal:\n got %q\nwant it to start %q", refusal, want)
	}
	if shouldRetry != "false" {
		t.Errorf("X-Should-Retry %q, want false", shouldRetry)
	}
	if !s.OutOfBudget || s.Budget == nil || *s.Budget != (wire.TaskBudget{USD: budget, Tokens: 1 << 40}) {
		t.Errorf("the task's spend %+v: want out of its budget, the task's own (smaller than its worker's)", s)
	}
	t.Logf("48 requests of 400 tokens of output at most: %d let through, %s spent of %s", statuses[200], s.Cost, budget)
	r.mu.Lock()
	crossings := 0
	for _, c := range r.crossed {
		if c.Task == "job-budget" {
			crossings++
		}
	}
	r.mu.Unlock()
	if crossings != 1 {
		t.Errorf("%d crossings of the task's budget, want one event", crossings)
	}
	r.g.limiter.mu.Lock()
	_, kept := r.g.limiter.told[scopeID{task: 21}]
	r.g.limiter.mu.Unlock()
	if kept {
		t.Error("the limiter still keeps the finished task's crossing")
	}
	// After a restart, the task's spend, and that it ran out, are there.
	r.g.Store.Close()
	st, err := OpenStore(r.storeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if back := st.Task(21); back.Cost != s.Cost || back.Requests != s.Requests || !back.OutOfBudget || back.Budget == nil {
		t.Errorf("after a restart: %+v, want %+v", back, s)
	}
}

// The spend asked for a task being finished waits for its request under
// way: the result stores the task's whole cost.
func TestGatewayTaskSpendWaitsForItsLastRequest(t *testing.T) {
	r, l := taskRig(t, wire.TaskBudget{})
	l.set(idA, wire.Held{Seq: 5, ID: "slow", Agent: idA})
	done := make(chan int)
	go func() {
		status, _, _ := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicStreamReq, "X-Standin-Words", "40", "X-Standin-Delay", "10ms")
		done <- status
	}()
	eventually(t, func() error {
		r.g.flights.mu.Lock()
		defer r.g.flights.mu.Unlock()
		if r.g.flights.n[5] == 0 {
			return errors.New("the request is not under way yet")
		}
		return nil
	})
	s := r.g.TaskSpend(5, true)
	if s.Requests != 1 || s.Tokens.OutputTokens == 0 {
		t.Errorf("the final spend %+v left out the request under way", s)
	}
	if status := <-done; status != 200 {
		t.Errorf("the stream: %d", status)
	}
}
