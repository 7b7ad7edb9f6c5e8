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

// publishTimeout bounds waiting for the bus to confirm one stored result.
const publishTimeout = 5 * time.Second

// storeResult stores res on wire.ResultSubject through JetStream and
// returns once the bus confirmed it. While the bus is away it retries (the
// bus may be restarting), and past ctx's end for stopGrace more. A result
// the bus can never store (too large for a message) is replaced by a
// failed one saying why, so the task still gets its outcome.
func (a *Agent) storeResult(ctx context.Context, js jetstream.JetStream, t Task, res wire.Result) error {
	msg, err := resultMsg(t, res)
	if err != nil {
		return err
	}
	var giveUp time.Time
	replaced := false
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		ack, err := js.PublishMsg(pctx, msg)
		cancel()
		switch {
		case err == nil:
			if ack.Duplicate {
				a.log.Info("task result already stored by an earlier delivery; this one is dropped", "task_id", t.ID)
			}
			return nil
		case !transient(err) && !replaced:
			replaced = true
			a.log.Error("the bus cannot store the task's result; storing a failed one instead", "task_id", t.ID, "error", err.Error())
			res = wire.Result{TaskID: res.TaskID, Agent: res.Agent, ExitStatus: res.ExitStatus, DurationMS: res.DurationMS,
				Truncated: res.Truncated, Error: fmt.Sprintf("the result could not be stored (%v); output dropped", err)}
			if msg, err = resultMsg(t, res); err != nil {
				return err
			}
			continue
		case !transient(err):
			return fmt.Errorf("storing the result of task %s: %w", t.ID, err)
		}
		if attempt == 1 {
			a.log.Warn("storing the task's result failed, retrying", "task_id", t.ID, "error", err.Error())
		}
		if ctx.Err() != nil {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(stopGrace)
			} else if time.Now().After(giveUp) {
				return fmt.Errorf("storing the result of task %s before stopping: %w", t.ID, err)
			}
		}
		time.Sleep(reconnectDelay(attempt))
	}
}

// resultMsg is res as stored: its task's id and subject in headers, and
// the deduplication id that keeps one result per task.
func resultMsg(t Task, res wire.Result) (*nats.Msg, error) {
	h, body, err := wire.ResultMessage(t.ID, t.Subject, res)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: wire.ResultSubject, Header: h, Data: body}, nil
}

// transient reports whether storing may work when tried again: the bus
// did not answer (away, restarting), as opposed to refusing.
func transient(err error) bool {
	for _, e := range []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, nats.ErrConnectionReconnecting, nats.ErrDisconnected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
