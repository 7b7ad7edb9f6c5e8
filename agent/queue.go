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

// queue is the consumers an agent pulls tasks from.
type queue struct {
	consumers []jetstream.Consumer
	ackWait   time.Duration
}

// bind finds the bus's consumers by name; it never creates one (an agent
// may not). Until they exist (the bus not up yet, or not reloaded with
// this agent) it retries, saying so once.
func (a *Agent) bind(ctx context.Context, js jetstream.JetStream, names []string) (*queue, error) {
	q := &queue{}
	for _, name := range names {
		for attempt := 1; ; attempt++ {
			c, err := js.Consumer(ctx, wire.TasksStream, name)
			if err == nil {
				q.consumers = append(q.consumers, c)
				if w := c.CachedInfo().Config.AckWait; q.ackWait == 0 || w < q.ackWait {
					q.ackWait = w
				}
				break
			}
			if attempt == 1 {
				a.log.Warn("the bus's task consumer is not reachable yet, retrying", "consumer", name, "error", err.Error())
			}
			if !sleep(ctx, reconnectDelay(attempt)) {
				return nil, ctx.Err()
			}
		}
	}
	return q, nil
}

// next waits for a task from any consumer. One pull is open per consumer
// while the agent is idle; the first task to come ends the others, so a
// task meant for any worker does not sit with this one while it is busy.
// A task handed over in the same instant by another consumer is returned
// too (and run next). The error is the pulls' when no task came; a pull
// that simply expired is not one. When back is closed (the connection was
// re-established: a restarted bus forgot the pulls) it returns at once,
// with nothing, to pull again.
func (q *queue) next(ctx context.Context, back <-chan struct{}) ([]jetstream.Msg, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-back:
			cancel()
		case <-pctx.Done():
		}
	}()
	type pulled struct {
		m   jetstream.Msg
		err error
	}
	ch := make(chan pulled, len(q.consumers))
	for _, c := range q.consumers {
		go func() {
			m, err := c.Next(jetstream.FetchContext(pctx))
			ch <- pulled{m, err}
		}()
	}
	var msgs []jetstream.Msg
	var errs []error
	for range q.consumers {
		p := <-ch
		cancel()
		switch {
		case p.m != nil:
			msgs = append(msgs, p.m)
		case errors.Is(p.err, context.Canceled), errors.Is(p.err, nats.ErrTimeout):
		case p.err != nil:
			errs = append(errs, p.err)
		}
	}
	if len(msgs) > 0 || len(errs) == 0 {
		return msgs, nil
	}
	return nil, fmt.Errorf("pulling tasks from stream %s: %w", wire.TasksStream, errors.Join(errs...))
}
