package proxyd

// Tier: unit (loopback only, as proxyd_test.go). The cost of a task end to
// end: the real bus and its task desk, flock-agent's own task loop taking
// a task for agent 1, whose handler calls the model gateway as agent 1;
// the request is charged to the task flock-proxy learns of from the desk,
// and the desk stores the task's spend with its result.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

func TestATasksSpendIsStoredWithItsResult(t *testing.T) {
	r := newRig(t)
	r.config("127.0.0.1:0", true)
	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	a, err := agent.Connect(context.Background(), agent.Env{ID: 1, Role: "worker", NATSURL: r.busURL, NKeyFile: r.worker}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The worker's handler: the task's payload is how many requests to
	// make, each through the gateway as agent 1 (the test's uid).
	go a.ServeTasks(ctx, "worker", func(ctx context.Context, task agent.Task) wire.Result {
		var n int
		fmt.Sscan(string(task.Payload), &n)
		for range n {
			resp, err := http.Post(fmt.Sprintf("http://%s/anth/v1/messages", s.Addr()), "application/json", strings.NewReader(request))
			if err != nil {
				return wire.Result{Error: err.Error()}
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return wire.Result{Error: fmt.Sprintf("%d %s", resp.StatusCode, b)}
			}
		}
		// A worker cannot set its own cost: the desk replaces it.
		return wire.Result{OK: true, Output: "done", Spend: &wire.TaskSpend{Requests: 1}}
	})

	run := func(id string, requests int, budget wire.TaskBudget) wire.Result {
		t.Helper()
		since := time.Now()
		if _, err := operator.SendTaskWithin(ctx, r.op, wire.AgentTasks(1), id, []byte(fmt.Sprint(requests)), budget); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		res, err := operator.WaitResult(wctx, r.op, id, since)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		return res
	}
	three := run("three", 3, wire.TaskBudget{})
	if !three.OK || three.Spend == nil || three.Spend.Requests != 3 || three.Spend.Tokens.Total() == 0 {
		t.Fatalf("task three's result: %+v (spend %+v), want its three requests", three, three.Spend)
	}
	two := run("two", 2, wire.TaskBudget{})
	if !two.OK || two.Spend == nil || two.Spend.Requests != 2 {
		t.Fatalf("task two's result: %+v (spend %+v)", two, two.Spend)
	}
	var sum wire.Tokens
	sum.Add(three.Spend.Tokens)
	sum.Add(two.Spend.Tokens)
	if got := s.models.store.Usage(1)["anth"].Tokens; got != sum {
		t.Errorf("the two tasks' spends add up to %+v, agent 1 spent %+v", sum, got)
	}
	// A task's own budget too small for one request: refused before it
	// is sent, and the result says the task ran out of it.
	over := run("over", 1, wire.TaskBudget{Tokens: 10})
	if over.OK || over.Spend == nil || !over.Spend.OutOfBudget || over.Spend.Requests != 0 || !strings.Contains(over.Error, `task \"over\" is out of its budget task_tokens=10`) {
		t.Errorf("task over's result: %+v (spend %+v), want it failed on its budget, nothing spent", over, over.Spend)
	}
}
