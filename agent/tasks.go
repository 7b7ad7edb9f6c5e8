package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// Task is one task as it came off the bus.
type Task struct {
	// ID is the task's Flock-Task-Id header, else its Nats-Msg-Id, else
	// one made of its place in the stream: the same on every delivery.
	ID       string
	Subject  string // tasks.worker, or tasks.agent.N for this agent alone
	Payload  []byte // the message body
	Delivery uint64 // 1 the first time; more when a worker before this one did not finish it
}

// Handler does one task. Its ctx ends when ServeTasks is stopping.
type Handler func(ctx context.Context, t Task) wire.Result

// stopGrace bounds how long a stopping agent keeps trying to store the
// result in hand; beyond it the task is left to be handed out again.
const stopGrace = 10 * time.Second

// ServeTasks takes tasks from the bus's task desk, one at a time: tasks
// addressed to this agent first, else one any worker of role may take
// (the desk pulls them from wire.AgentConsumer and wire.RoleConsumer on
// its behalf). While h runs the desk is told the task is in progress, so a
// long task is not handed to another worker; once h returns the result is
// handed in with the task's lease, and the desk stores it and
// acknowledges the task. An agent that dies before that leaves the task to
// be handed out again, and the result's deduplication id keeps one stored
// result per task.
//
// When ctx ends it stops taking tasks; the task in hand is stopped (h sees
// ctx done) and given back to the queue unless it finished, and ServeTasks
// returns. Until the bus takes its asks (not up yet, or not reloaded with
// this agent) it retries, so an agent may start before the bus.
func (a *Agent) ServeTasks(ctx context.Context, role string, h Handler) error {
	if role == "" {
		return errors.New("serving tasks: no role (AGENT_ROLE)")
	}
	a.log.Info("serving tasks", "desk", wire.Desk(a.env.ID, wire.DeskNext))
	failures := 0
	for ctx.Err() == nil {
		t, err := a.ask(ctx)
		switch {
		case err == nil:
			failures = 0
		case a.nc.IsClosed():
			return fmt.Errorf("serving tasks: %w", nats.ErrConnectionClosed)
		default:
			failures++
			if failures == 1 {
				a.log.Warn("asking the bus for tasks failed, retrying", "error", err.Error())
			}
			sleep(ctx, reconnectDelay(failures))
		}
		if t != nil {
			a.taskMu.Lock()
			a.serveOne(ctx, a.hold(*t), h)
			a.taskMu.Unlock()
		}
	}
	return nil
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// serveOne runs one task it holds (kept alive since it came) and hands
// in the result; the desk stores it and acknowledges the task.
func (a *Agent) serveOne(ctx context.Context, hd held, h Handler) {
	stop := hd.stop
	t := Task{ID: hd.t.ID, Subject: hd.t.Subject, Payload: hd.t.Payload, Delivery: hd.t.Delivery}
	if ctx.Err() != nil {
		stop()
		a.giveBack(hd.t, "the agent is stopping")
		return
	}
	a.log.Info("task started", "task_id", t.ID, "subject", t.Subject, "payload_bytes", len(t.Payload), "delivery", t.Delivery)
	start := time.Now()
	res := a.handle(ctx, t, h)
	if ctx.Err() != nil && !res.OK {
		stop()
		a.giveBack(hd.t, res.Error)
		return
	}
	res.TaskID = t.ID // the desk sets it too: a handler cannot rename its task
	res.Agent = a.env.ID
	if res.DurationMS == 0 {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	}
	if res.OK {
		a.done.Add(1)
	} else {
		a.failed.Add(1)
	}
	attrs := []any{"task_id", res.TaskID, "ok", res.OK, "exit_status", res.ExitStatus,
		"duration_ms", res.DurationMS, "output_bytes", len(res.Output) + len(res.Stderr), "truncated", res.Truncated}
	if res.Error != "" {
		attrs = append(attrs, "error", res.Error)
	}
	a.log.Info("task done", attrs...)
	err := a.storeResult(ctx, hd.t, res)
	stop()
	if err != nil {
		a.log.Error("task result not stored; the bus will hand the task out again", "task_id", t.ID, "error", err.Error())
	}
}

// giveBack returns a task the agent will not finish to the queue at once,
// for another worker (or this one, restarted).
func (a *Agent) giveBack(t wire.Handed, why string) {
	if err := a.deskRequest(t, wire.DeskRelease, nil, releaseTimeout); err != nil {
		a.log.Warn("giving the task back failed; the bus hands it out again after the ack wait", "task_id", t.ID, "error", err.Error())
		return
	}
	a.log.Info("task given back to the queue", "task_id", t.ID, "why", why)
}

// handle runs h, turning a panic into a failed task rather than a dead agent.
func (a *Agent) handle(ctx context.Context, t Task, h Handler) (res wire.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = wire.Result{ExitStatus: -1, Error: fmt.Sprintf("task handler panicked: %v", p)}
		}
	}()
	return h(ctx, t)
}

// keepAlive tells the desk every every that t is still being worked on,
// until the returned stop is called; stop returns once nothing more will
// be sent, so an "in progress" never follows the result.
func (a *Agent) keepAlive(t wire.Handed, every time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				// Lost while the bus is away: then it may hand the task
				// out again, and the result is still stored once.
				m := nats.NewMsg(wire.Desk(a.env.ID, wire.DeskProgress))
				m.Header.Set(wire.LeaseHeader, t.Lease)
				_ = a.nc.PublishMsg(m)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
