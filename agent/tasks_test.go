package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockrun/flock/bus/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Tasks on the role's queue and addressed to the agent are answered to
// the requester and on task.result, with the task id, one at a time, and
// counted for the heartbeat; ServeTasks returns when its context ends.
// Tier: unit (no root).
func TestServeTasks(t *testing.T) {
	au, tu := newUser(t), newUser(t)
	s := startBus(t, -1, &server.NkeyUser{Nkey: au.pub, Permissions: agentPerms(7, "worker")}, &server.NkeyUser{Nkey: tu.pub})
	tester := connectTester(t, s, tu)
	results, _ := tester.SubscribeSync(wire.ResultSubject)
	_ = tester.Flush()

	a, _ := testAgent(t, s, au)
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
	// The subscriptions are in place once made and the agent's PING is back.
	eventually(t, 5*time.Second, func() error {
		if n := a.Conn().NumSubscriptions(); n != 2 {
			return fmt.Errorf("%d subscriptions", n)
		}
		return a.Conn().Flush()
	})

	for _, tc := range []struct {
		name, subject, id, payload string
		ok                         bool
	}{
		{"role queue with id", wire.RoleTasks("worker"), "t-1", "hello", true},
		{"addressed, id made up", wire.AgentTasks(7), "", "to seven", true},
		{"lower-case header", wire.RoleTasks("worker"), "t-3", "again", true},
		{"failing", wire.AgentTasks(7), "t-4", "fail", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := nats.NewMsg(tc.subject)
			msg.Data = []byte(tc.payload)
			if tc.id != "" {
				key := wire.TaskIDHeader
				if tc.name == "lower-case header" {
					key = "flock-task-id"
				}
				msg.Header.Set(key, tc.id)
			}
			reply, err := tester.RequestMsg(msg, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var got, published wire.Result
			if err := json.Unmarshal(reply.Data, &got); err != nil {
				t.Fatal(err)
			}
			pm := next(t, results, &published)
			if got != published || pm.Header.Get(wire.TaskIDHeader) != got.TaskID {
				t.Errorf("reply %+v, task.result %+v (header %q)", got, published, pm.Header.Get(wire.TaskIDHeader))
			}
			if got.TaskID == "" || (tc.id != "" && got.TaskID != tc.id) || got.Agent != 7 || got.DurationMS <= 0 || got.OK != tc.ok {
				t.Errorf("result %+v", got)
			}
			if tc.ok && got.Output != tc.payload {
				t.Errorf("output %q, want %q", got.Output, tc.payload)
			}
		})
	}
	if d, f := a.done.Load(), a.failed.Load(); d != 3 || f != 1 {
		t.Errorf("done %d failed %d, want 3 and 1", d, f)
	}

	// Eight at once, on both subjects: still one at a time.
	var wg sync.WaitGroup
	for i := range 8 {
		subject := wire.RoleTasks("worker")
		if i%2 == 1 {
			subject = wire.AgentTasks(7)
		}
		wg.Go(func() {
			if _, err := tester.Request(subject, []byte("x"), 5*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d tasks ran at once", most.Load())
	}

	// A reply subject that is not an inbox gets nothing: the sender cannot
	// make the worker publish where its role may not. The result still
	// goes to task.result.
	spoofed, _ := tester.SubscribeSync(wire.Events(3))
	_ = tester.Flush()
	for {
		if _, err := results.NextMsg(10 * time.Millisecond); err != nil {
			break
		}
	}
	msg := nats.NewMsg(wire.AgentTasks(7))
	msg.Reply, msg.Data = wire.Events(3), []byte("spoof")
	msg.Header.Set(wire.TaskIDHeader, "t-spoof")
	if err := tester.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	var published wire.Result
	next(t, results, &published)
	if published.TaskID != "t-spoof" {
		t.Errorf("task.result %+v", published)
	}
	if m, err := spoofed.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("the worker answered on %s: %q", m.Subject, m.Data)
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

// Stopping ServeTasks stops the task in hand and still answers it, and
// returns promptly even when the bus is away. Tier: unit (no root).
func TestServeTasksStops(t *testing.T) {
	for _, busAway := range []bool{false, true} {
		t.Run(fmt.Sprintf("bus away %v", busAway), func(t *testing.T) {
			au, tu := newUser(t), newUser(t)
			s := startBus(t, -1, &server.NkeyUser{Nkey: au.pub, Permissions: agentPerms(7, "worker")}, &server.NkeyUser{Nkey: tu.pub})
			tester := connectTester(t, s, tu)
			a, logs := testAgent(t, s, au)
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() {
				served <- a.ServeTasks(ctx, "worker", func(ctx context.Context, task Task) wire.Result {
					return RunCommand(ctx, []string{"sleep", "30"}, "", nil, RunLimits{})
				})
			}()
			eventually(t, 5*time.Second, func() error {
				if n := a.Conn().NumSubscriptions(); n != 2 {
					return fmt.Errorf("%d subscriptions", n)
				}
				return a.Conn().Flush()
			})
			reply := make(chan *nats.Msg, 1)
			go func() {
				m, _ := tester.Request(wire.AgentTasks(7), nil, 10*time.Second)
				reply <- m
			}()
			eventually(t, 5*time.Second, func() error { return logHas(logs, `"msg":"task started"`) })
			if busAway {
				s.Shutdown()
				eventually(t, 5*time.Second, func() error {
					if a.Conn().IsConnected() {
						return fmt.Errorf("still connected")
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
			if err := logHas(logs, `"error":"stopped before it finished: context canceled"`); err != nil {
				t.Error(err)
			}
			if !busAway {
				var res wire.Result
				if m := <-reply; m == nil || json.Unmarshal(m.Data, &res) != nil || res.OK || res.ExitStatus != -1 {
					t.Errorf("reply %v: %+v", m, res)
				}
			}
		})
	}
}
