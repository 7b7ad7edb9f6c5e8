package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/syncbuf"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// taskBus is flock's own bus (JetStream in a temporary directory) for
// worker 7, the operator as the tester.
type taskBus struct {
	s     *bus.Server
	op    *nats.Conn
	js    jetstream.JetStream
	agent testUser
}

func startTaskBus(t *testing.T, dir string, listen string) *taskBus {
	t.Helper()
	au, ou := newUser(t), newUser(t)
	return startTaskBusAs(t, dir, listen, au, ou)
}

func startTaskBusAs(t *testing.T, dir, listen string, au, ou testUser) *taskBus {
	t.Helper()
	f := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: -1},
		Agents: []spec.Agent{{ID: 7, Role: spec.RoleWorker, TaskTimeout: spec.DefaultTimeout}}}
	c := bus.ForFlock(f, map[string]string{"flock-7": au.pub, creds.OperatorName: ou.pub})
	c.Tasks.AckWait = time.Second
	if listen != "" {
		c.Listen = listen
	}
	s, err := bus.Start(c, bus.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	op, err := nats.Connect(s.ClientURL(), nats.Nkey(ou.pub, ou.kp.Sign))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	js, err := jetstream.New(op)
	if err != nil {
		t.Fatal(err)
	}
	return &taskBus{s: s, op: op, js: js, agent: au}
}

// agent7 connects worker 7 to the bus.
func (b *taskBus) agent7(t *testing.T) (*Agent, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	env := Env{ID: 7, Role: "worker", NATSURL: b.s.ClientURL(), NKeyFile: b.agent.seedFile}
	a, err := Connect(context.Background(), env, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, logs
}

// publish stores a task as the tester.
func (b *taskBus) publish(t *testing.T, m *nats.Msg) {
	t.Helper()
	if _, err := b.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// result waits for the stored result of task id and its message.
func (b *taskBus) result(t *testing.T, id string) (wire.Result, *jetstream.RawStreamMsg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := operator.WaitResult(ctx, b.op, id, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatalf("the result of %s: %v", id, err)
	}
	s, err := b.js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(wire.ResultSubject))
		if err != nil {
			t.Fatalf("looking for the message of %s's result: %v", id, err)
		}
		if raw.Header.Get(wire.TaskIDHeader) == id {
			return res, raw
		}
		seq = raw.Sequence + 1
	}
}

// Tasks for the role and for the agent are taken from the bus's queue one
// at a time; each result is stored with the task's id and subject and
// counted for the heartbeat; ServeTasks returns when its context ends.
// Tier: unit (no root).
func TestServeTasks(t *testing.T) {
	b := startTaskBus(t, t.TempDir(), "")
	a, _ := b.agent7(t)
	var running, most atomic.Int32
	handler := func(ctx context.Context, task Task) wire.Result {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // so overlapping tasks would show
		if string(task.Payload) == "fail" {
			return RunCommand(ctx, []string{"sh", "-c", "exit 3"}, "", nil, RunLimits{})
		}
		return RunCommand(ctx, []string{"cat"}, "", task.Payload, RunLimits{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.ServeTasks(ctx, "worker", handler) }()

	for _, tc := range []struct {
		name, subject, header, id, payload string
		ok                                 bool
	}{
		{"role queue with id", wire.RoleTasks("worker"), wire.TaskIDHeader, "t-1", "hello", true},
		{"addressed, id of its place in the stream", wire.AgentTasks(7), "", "seq-2", "to seven", true},
		{"lower-case header", wire.RoleTasks("worker"), "flock-task-id", "t-3", "again", true},
		{"deduplication id only", wire.AgentTasks(7), wire.MsgIDHeader, "t-4", "dedup", true},
		{"failing", wire.AgentTasks(7), wire.TaskIDHeader, "t-5", "fail", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := nats.NewMsg(tc.subject)
			msg.Data = []byte(tc.payload)
			if tc.header != "" {
				msg.Header[tc.header] = []string{tc.id}
			}
			b.publish(t, msg)
			got, raw := b.result(t, tc.id)
			if got.TaskID != tc.id || got.Agent != 7 || got.DurationMS <= 0 || got.OK != tc.ok {
				t.Errorf("result %+v", got)
			}
			if tc.ok && got.Output != tc.payload {
				t.Errorf("output %q, want %q", got.Output, tc.payload)
			}
			if h := raw.Header; h.Get(wire.TaskIDHeader) != tc.id || h.Get(wire.TaskSubjectHeader) != tc.subject || h.Get(wire.MsgIDHeader) != wire.ResultMsgID(tc.id) {
				t.Errorf("result headers %v", h)
			}
		})
	}
	if d, f := a.done.Load(), a.failed.Load(); d != 4 || f != 1 {
		t.Errorf("done %d failed %d, want 4 and 1", d, f)
	}

	// Eight at once, on both subjects: still one at a time.
	var ids []string
	for i := range 8 {
		subject := wire.RoleTasks("worker")
		if i%2 == 1 {
			subject = wire.AgentTasks(7)
		}
		msg := nats.NewMsg(subject)
		id := fmt.Sprintf("many-%d", i)
		msg.Header.Set(wire.TaskIDHeader, id)
		b.publish(t, msg)
		ids = append(ids, id)
	}
	for _, id := range ids {
		b.result(t, id)
	}
	if most.Load() != 1 {
		t.Errorf("%d tasks ran at once", most.Load())
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeTasks: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ServeTasks did not return after its context ended")
	}
}

// Stopping ServeTasks stops the task in hand and gives it back to the
// queue (the next worker gets it, a second delivery), and returns
// promptly even when the bus is away. Tier: unit (no root).
func TestServeTasksStops(t *testing.T) {
	for _, busAway := range []bool{false, true} {
		t.Run(fmt.Sprintf("bus away %v", busAway), func(t *testing.T) {
			b := startTaskBus(t, t.TempDir(), "")
			a, logs := b.agent7(t)
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() {
				served <- a.ServeTasks(ctx, "worker", func(ctx context.Context, task Task) wire.Result {
					return RunCommand(ctx, []string{"sleep", "30"}, "", nil, RunLimits{})
				})
			}()
			msg := nats.NewMsg(wire.AgentTasks(7))
			msg.Header.Set(wire.TaskIDHeader, "long")
			b.publish(t, msg)
			eventually(t, 5*time.Second, func() error { return logHas(logs, `"msg":"task started"`) })
			if busAway {
				b.s.Shutdown()
				eventually(t, 5*time.Second, func() error {
					if a.Conn().IsConnected() {
						return errors.New("still connected")
					}
					return nil
				})
			}
			start := time.Now()
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("ServeTasks: %v", err)
				}
			case <-time.After(killGrace + 3*time.Second):
				t.Fatal("ServeTasks did not return")
			}
			if took := time.Since(start); took > killGrace+time.Second {
				t.Errorf("stopping took %s", took)
			}
			if busAway {
				return
			}
			if err := logHas(logs, `"msg":"task given back to the queue"`); err != nil {
				t.Error(err)
			}
			// The next worker (this one, restarted) gets it again.
			var got atomic.Pointer[Task]
			ctx2, cancel2 := context.WithCancel(context.Background())
			defer cancel2()
			go a.ServeTasks(ctx2, "worker", func(_ context.Context, task Task) wire.Result {
				got.Store(&task)
				return wire.Result{OK: true}
			})
			b.result(t, "long")
			if task := got.Load(); task == nil || task.ID != "long" || task.Delivery != 2 {
				t.Errorf("after being given back the task came as %+v, want delivery 2", task)
			}
		})
	}
}

// A result the bus cannot store (larger than a message may be) is
// replaced by a failed one saying so, and the task is acknowledged: it
// gets an outcome rather than running until dead-lettered.
// Tier: unit (no root).
func TestServeTasksResultTooLarge(t *testing.T) {
	b := startTaskBus(t, t.TempDir(), "")
	a, logs := b.agent7(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.ServeTasks(ctx, "worker", func(context.Context, Task) wire.Result {
		return wire.Result{OK: true, Output: strings.Repeat("x", bus.MaxPayload)}
	})
	msg := nats.NewMsg(wire.RoleTasks("worker"))
	msg.Header.Set(wire.TaskIDHeader, "huge")
	b.publish(t, msg)
	res, _ := b.result(t, "huge")
	if res.OK || res.Output != "" || !strings.Contains(res.Error, "the result could not be stored") {
		t.Errorf("result %+v", res)
	}
	eventually(t, 5*time.Second, func() error {
		return logHas(logs, `"msg":"the bus cannot store the task's result; storing a failed one instead"`)
	})
}
