package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flockrun/flock/bus/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Task is one task as it came off the bus.
type Task struct {
	ID      string // the Flock-Task-Id header, or one made up
	Payload []byte // the message body
}

// Handler does one task. Its ctx ends when ServeTasks is stopping.
type Handler func(ctx context.Context, t Task) wire.Result

// ServeTasks takes tasks for role (queue group role on wire.RoleTasks, so
// each goes to one agent of the role) and tasks addressed to this agent
// (wire.AgentTasks), one at a time, and publishes each result on
// wire.ResultSubject and to the task's reply subject if it has one. When
// ctx ends it stops taking tasks, answers those already received (the
// handler sees ctx done) and returns; the error is only about letting go
// of the subscriptions.
func (a *Agent) ServeTasks(ctx context.Context, role string, h Handler) error {
	if role == "" {
		return errors.New("serving tasks: no role (AGENT_ROLE)")
	}
	serve := func(m *nats.Msg) {
		// Both subscriptions deliver on goroutines of their own.
		a.taskMu.Lock()
		defer a.taskMu.Unlock()
		a.serveOne(ctx, m, h)
	}
	queue, err := a.nc.QueueSubscribe(wire.RoleTasks(role), role, serve)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", wire.RoleTasks(role), err)
	}
	direct, err := a.nc.Subscribe(wire.AgentTasks(a.env.ID), serve)
	if err != nil {
		_ = queue.Unsubscribe()
		return fmt.Errorf("subscribing to %s: %w", wire.AgentTasks(a.env.ID), err)
	}
	a.log.Info("serving tasks", "subjects", []string{wire.RoleTasks(role), wire.AgentTasks(a.env.ID)}, "queue", role)
	<-ctx.Done()
	err = a.stopServing(queue, direct)
	// A closed subscription's last callback has returned; the lock makes
	// that plain, whatever nats.go does, and waits for the task in hand.
	a.taskMu.Lock()
	defer a.taskMu.Unlock()
	return err
}

// drainWait bounds waiting for the bus to confirm a drain; beyond it the
// subscriptions are just dropped.
const drainWait = 10 * time.Second

// stopServing drains subs so tasks already received are answered. With
// the bus away a drain would wait for a round trip that cannot happen
// (and nothing could be answered): then it unsubscribes.
func (a *Agent) stopServing(subs ...*nats.Subscription) error {
	var errs []error
	deadline := time.After(drainWait)
	for _, sub := range subs {
		closed := sub.StatusChanged(nats.SubscriptionClosed) // closed with the sub
		if !a.nc.IsConnected() || sub.Drain() != nil {
			if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("unsubscribing %s: %w", sub.Subject, err))
			}
			continue
		}
		select {
		case <-closed: // the only status asked for, or the channel's close
		case <-deadline:
			_ = sub.Unsubscribe()
		}
	}
	return errors.Join(errs...)
}

func (a *Agent) serveOne(ctx context.Context, m *nats.Msg, h Handler) {
	t := Task{ID: taskID(m.Header), Payload: m.Data}
	if t.ID == "" {
		t.ID = nuid.Next()
	}
	a.log.Info("task started", "task_id", t.ID, "subject", m.Subject, "payload_bytes", len(t.Payload))
	start := time.Now()
	res := a.handle(ctx, t, h)
	if res.TaskID == "" {
		res.TaskID = t.ID
	}
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
	if err := a.sendResult(m, res); err != nil {
		a.log.Error("sending task result", "task_id", res.TaskID, "error", err.Error())
	}
}

// taskID reads the task id header; NATS headers are case-sensitive, but
// a person typing `nats req -H flock-task-id:x` means the same header.
func taskID(h nats.Header) string {
	if id := h.Get(wire.TaskIDHeader); id != "" {
		return id
	}
	for k, v := range h {
		if strings.EqualFold(k, wire.TaskIDHeader) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
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

func (a *Agent) sendResult(m *nats.Msg, res wire.Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	hdr := nats.Header{wire.TaskIDHeader: []string{res.TaskID}}
	var errs []error
	if err := a.nc.PublishMsg(&nats.Msg{Subject: wire.ResultSubject, Header: hdr, Data: b}); err != nil {
		errs = append(errs, fmt.Errorf("publishing %s: %w", wire.ResultSubject, err))
	}
	// Only to an inbox: the server lets a worker answer whatever reply
	// subject a task names, so a sender could otherwise make it publish
	// once where its role may not (another agent's events, flock.bus.*).
	if strings.HasPrefix(m.Reply, "_INBOX.") {
		if err := m.RespondMsg(&nats.Msg{Header: hdr, Data: b}); err != nil {
			errs = append(errs, fmt.Errorf("replying to %s: %w", m.Reply, err))
		}
	}
	return errors.Join(errs...)
}
