package bus

// Helpers of the durable-task tests: a flock with two workers on a real
// bus (JetStream in a temporary directory), flock-agent's own task loop
// (agent.ServeTasks) as the workers, and the operator reading the streams.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/internal/syncbuf"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// twoWorkers is orchestrator 1, workers 2 and 4, monitor 3, on a free port.
func twoWorkers() *spec.Flock {
	f := testFlock()
	f.Agents = append(f.Agents, spec.Agent{ID: 4, Role: spec.RoleWorker, TaskTimeout: spec.DefaultTimeout})
	return f
}

var everyoneAnd4 = append([]string{"flock-4"}, everyone...)

// taskBus starts a bus for twoWorkers with a short ack wait (tests would
// otherwise wait 30 s for a dead worker's task), changed by change.
func taskBus(t testing.TB, ids identities, o Options, change func(*Config)) *Server {
	t.Helper()
	c := ForFlock(twoWorkers(), ids.keys())
	c.Tasks.AckWait = time.Second
	if change != nil {
		change(&c)
	}
	return startBus(t, c, o)
}

// seedFile writes name's seed where agent.Connect reads it.
func seedFile(t testing.TB, ids identities, name string) string {
	t.Helper()
	seed, err := ids[name].Seed()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// worker is flock-agent's task loop as agent id, serving until stopped.
type worker struct {
	a       *agent.Agent
	logs    *syncbuf.Buffer
	cancel  context.CancelFunc
	done    chan error
	stopped sync.Once
}

// startWorker connects agent id to url and serves tasks with h.
func startWorker(t testing.TB, url string, ids identities, id int, h agent.Handler) *worker {
	t.Helper()
	w := &worker{logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
	env := agent.Env{ID: id, Role: "worker", NATSURL: url, NKeyFile: seedFile(t, ids, spec.UserName(id)), Heartbeat: time.Hour}
	a, err := agent.Connect(context.Background(), env, slog.New(slog.NewJSONHandler(w.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w.a = a
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- a.ServeTasks(ctx, "worker", h) }()
	t.Cleanup(func() { w.stop(t); _ = a.Close() })
	return w
}

// stop ends ServeTasks and waits for it; again, it does nothing.
func (w *worker) stop(t testing.TB) {
	w.cancel()
	w.stopped.Do(func() {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Errorf("ServeTasks did not return; its log:\n%s", w.logs.String())
		}
	})
}

// echo answers every task with its payload, counting runs by task id.
type echo struct {
	mu   sync.Mutex
	runs map[string][]int // task id -> agents that ran it
}

func newEcho() *echo { return &echo{runs: map[string][]int{}} }

func (e *echo) handler(id int) agent.Handler {
	return func(_ context.Context, t agent.Task) wire.Result {
		e.mu.Lock()
		e.runs[t.ID] = append(e.runs[t.ID], id)
		e.mu.Unlock()
		return wire.Result{OK: true, Output: string(t.Payload)}
	}
}

func (e *echo) ranBy(id string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.runs[id]...)
}

// send stores a task as the operator.
func send(t testing.TB, nc *nats.Conn, subject, id, payload string) operator.Sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sent, err := operator.SendTask(ctx, nc, subject, id, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return sent
}

// sendEach stores a task per id on subject, its payload its id.
func sendEach(t testing.TB, nc *nats.Conn, subject string, ids []string) {
	t.Helper()
	for _, id := range ids {
		send(t, nc, subject, id, id)
	}
}

// stored is every result in RESULTS by task id, in order.
func stored(t testing.TB, nc *nats.Conn) map[string][]wire.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]wire.Result{}
	for seq := uint64(1); ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(wire.ResultSubject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Result
		if err := json.Unmarshal(raw.Data, &r); err != nil {
			t.Fatalf("result %d: %q: %v", raw.Sequence, raw.Data, err)
		}
		if h := raw.Header.Get(wire.TaskIDHeader); h != r.TaskID {
			t.Errorf("result %d: header %s=%q, body task_id %q", raw.Sequence, wire.TaskIDHeader, h, r.TaskID)
		}
		out[r.TaskID] = append(out[r.TaskID], r)
		seq = raw.Sequence + 1
	}
}

// waitResults waits until every id has a stored result.
func waitResults(t testing.TB, nc *nats.Conn, within time.Duration, ids ...string) map[string][]wire.Result {
	t.Helper()
	var got map[string][]wire.Result
	deadline := time.Now().Add(within)
	for {
		got = stored(t, nc)
		missing := 0
		for _, id := range ids {
			if len(got[id]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d tasks have no stored result", within, missing, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamMsgs is how many messages stream holds.
func streamMsgs(t testing.TB, nc *nats.Conn, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// waitEmpty waits until TASKS holds nothing: every task acknowledged.
func waitEmpty(t testing.TB, nc *nats.Conn) {
	t.Helper()
	waitForWithin(t, 10*time.Second, "TASKS to be empty", func() bool { return streamMsgs(t, nc, wire.TasksStream) == 0 })
}

// waitForWithin is waitFor with its own deadline.
func waitForWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdsWithin polls cond until it holds or within passes, and says
// whether it held: waitForWithin for a check that reports and goes on.
func holdsWithin(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func taskIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}

// testLog writes the bus's log lines to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
