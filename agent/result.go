package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// storeResult hands res to the desk with t's lease and returns once the
// desk stored it. While the bus is away it retries (the bus may be
// restarting), and past ctx's end for stopGrace more. A result the bus
// can never store (too large for a message) is replaced by a failed one
// saying why, so the task still gets its outcome. A refused lease (the
// task went to another worker since) ends it: that worker's result counts.
func (a *Agent) storeResult(ctx context.Context, t wire.Handed, res wire.Result) error {
	body, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encoding the result of task %s: %w", t.ID, err)
	}
	var giveUp time.Time
	replaced := false
	for attempt := 1; ; attempt++ {
		err := a.deskRequest(t, wire.DeskResult, body, deskTimeout)
		kind := refused(err)
		switch {
		case err == nil:
			return nil
		case kind == wire.RefusedGone:
			// Its result is stored (this one's, its answer lost across a
			// bus restart, or an earlier delivery's): nothing is lost.
			a.log.Info("the task is no longer queued; its result was stored already", "task_id", t.ID)
			return nil
		case (kind == wire.RefusedNotStored || errors.Is(err, nats.ErrMaxPayload)) && !replaced:
			replaced = true
			a.log.Error("the bus cannot store the task's result; storing a failed one instead", "task_id", t.ID, "error", err.Error())
			res = wire.Result{TaskID: res.TaskID, Agent: res.Agent, ExitStatus: res.ExitStatus, DurationMS: res.DurationMS,
				Truncated: res.Truncated, Error: fmt.Sprintf("the result could not be stored (%v); output dropped", err)}
			if body, err = json.Marshal(res); err != nil {
				return err
			}
			continue
		case kind != "" && kind != wire.RefusedUnavailable, !transient(err) && kind == "":
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

// transient reports whether storing may work when tried again: the bus
// did not answer (away, restarting), as opposed to refusing.
func transient(err error) bool {
	for _, e := range []error{errReconnected, context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
