package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/bus/wire"
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

// ackTimeout bounds waiting for the bus to confirm an acknowledgement.
const ackTimeout = 10 * time.Second

// ServeTasks takes tasks from the bus's durable queue, one at a time: from
// the consumer every agent of role shares (wire.RoleConsumer, so each task
// goes to one of them) and from this agent's own (wire.AgentConsumer, the
// tasks addressed to it). While h runs the bus is told the task is in
// progress, so a long task is not handed to another worker; once h
// returns, the result is stored on wire.ResultSubject (the bus confirms
// it) and only then is the task acknowledged. An agent that dies before
// that leaves the task to be handed out again, and the result's
// deduplication id keeps one stored result per task.
//
// When ctx ends it stops taking tasks; the task in hand is stopped (h sees
// ctx done) and given back to the queue unless it finished, and ServeTasks
// returns. It waits for the bus's consumers to exist, retrying, so an
// agent may start before the bus.
func (a *Agent) ServeTasks(ctx context.Context, role string, h Handler) error {
	if role == "" {
		return errors.New("serving tasks: no role (AGENT_ROLE)")
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		return fmt.Errorf("serving tasks: %w", err)
	}
	shared, own := wire.RoleConsumer(role), wire.AgentConsumer(a.env.ID)
	q, err := a.bind(ctx, js, shared, own)
	if err != nil {
		return nil // ctx ended first
	}
	a.log.Info("serving tasks", "stream", wire.TasksStream, "consumers", []string{shared, own}, "ack_wait", q.ackWait.String())
	octx, stopOwn := context.WithCancel(ctx)
	owner := make(chan struct{})
	go func() { a.pullOwn(octx, q); close(owner) }()
	defer func() { stopOwn(); <-owner }() // a task of its own in hand is given back
	failures := 0
	for ctx.Err() == nil {
		tasks, err := a.next(ctx, q)
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
		for _, t := range tasks {
			a.taskMu.Lock()
			a.serveOne(ctx, js, t, h)
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

// serveOne runs one task it holds (kept alive since it came: a second
// task handed over with the first waits its turn, and must not be handed
// out again meanwhile), stores the result and acknowledges the task.
func (a *Agent) serveOne(ctx context.Context, js jetstream.JetStream, held held, h Handler) {
	m, stop := held.m, held.stop
	md, err := m.Metadata()
	if err != nil { // not from a consumer: nothing to acknowledge
		stop()
		a.log.Error("a task without JetStream metadata, dropped", "subject", m.Subject(), "error", err.Error())
		return
	}
	t := Task{ID: wire.TaskID(m.Headers(), md.Sequence.Stream), Subject: m.Subject(), Payload: m.Data(), Delivery: md.NumDelivered}
	if ctx.Err() != nil {
		stop()
		a.giveBack(m, t.ID, "the agent is stopping")
		return
	}
	a.log.Info("task started", "task_id", t.ID, "subject", t.Subject, "payload_bytes", len(t.Payload), "delivery", t.Delivery)
	start := time.Now()
	res := a.handle(ctx, t, h)
	if ctx.Err() != nil && !res.OK {
		stop()
		a.giveBack(m, t.ID, res.Error)
		return
	}
	res.TaskID = t.ID // the id deduplicates results: a handler cannot rename its task
	if res.Agent == 0 {
		res.Agent = a.env.ID
	}
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
	err = a.storeResult(ctx, js, t, res)
	stop()
	if err != nil {
		a.log.Error("task result not stored; the bus will hand the task out again", "task_id", t.ID, "error", err.Error())
		return
	}
	actx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		a.log.Warn("acknowledging the task failed; it may run again (its result is stored once)", "task_id", t.ID, "error", err.Error())
	}
}

// giveBack returns a task the agent will not finish to the queue at once,
// for another worker (or this one, restarted).
func (a *Agent) giveBack(m jetstream.Msg, id, why string) {
	if err := m.Nak(); err != nil {
		a.log.Warn("giving the task back failed; the bus hands it out again after the ack wait", "task_id", id, "error", err.Error())
		return
	}
	a.log.Info("task given back to the queue", "task_id", id, "why", why)
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

// keepAlive tells the bus every every that m is still being worked on,
// until the returned stop is called; stop returns once nothing more will
// be sent, so an "in progress" never follows the acknowledgement.
func keepAlive(m jetstream.Msg, every time.Duration) (stop func()) {
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
				_ = m.InProgress()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
