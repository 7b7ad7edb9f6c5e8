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

// queue is where an agent takes tasks from: the consumer its role shares
// and its own.
type queue struct {
	shared, own jetstream.Consumer
	ackWait     time.Duration
	owned       chan held // tasks from own, handed over one by one
}

// held is a task in the agent's hands, kept alive from the moment it came
// until stop.
type held struct {
	m    jetstream.Msg
	stop func()
}

func (q *queue) hold(m jetstream.Msg) held { return held{m, keepAlive(m, q.ackWait/3)} }

// bind finds the bus's consumers by name; it never creates one (an agent
// may not). Until they exist (the bus not up yet, or not reloaded with
// this agent) it retries, saying so once.
func (a *Agent) bind(ctx context.Context, js jetstream.JetStream, shared, own string) (*queue, error) {
	q := &queue{owned: make(chan held)}
	for _, b := range []struct {
		name string
		c    *jetstream.Consumer
	}{{shared, &q.shared}, {own, &q.own}} {
		for attempt := 1; ; attempt++ {
			c, err := js.Consumer(ctx, wire.TasksStream, b.name)
			if err == nil {
				*b.c = c
				if w := c.CachedInfo().Config.AckWait; q.ackWait == 0 || w < q.ackWait {
					q.ackWait = w
				}
				break
			}
			if attempt == 1 {
				a.log.Warn("the bus's task consumer is not reachable yet, retrying", "consumer", b.name, "error", err.Error())
			}
			if !sleep(ctx, reconnectDelay(attempt)) {
				return nil, ctx.Err()
			}
		}
	}
	return q, nil
}

// pullOwn keeps a pull open on the agent's own consumer while ctx lives,
// busy or not: what comes there is for this agent alone, so it may wait
// its turn (kept alive). Each task goes to q.owned; one in hand when ctx
// ends is given back.
func (a *Agent) pullOwn(ctx context.Context, q *queue) {
	failures := 0
	for ctx.Err() == nil {
		m, err := a.pull(ctx, q.own)
		if err != nil {
			failures++
			if failures == 1 {
				a.log.Warn("asking the bus for this agent's tasks failed, retrying", "error", err.Error())
			}
			sleep(ctx, reconnectDelay(failures))
			continue
		}
		failures = 0
		if m == nil {
			continue
		}
		h := q.hold(m)
		select {
		case q.owned <- h:
		case <-ctx.Done():
			h.stop()
			id := "?"
			if md, err := m.Metadata(); err == nil {
				id = wire.TaskID(m.Headers(), md.Sequence.Stream)
			}
			a.giveBack(m, id, "the agent is stopping")
			return
		}
	}
}

// next waits for a task: one of this agent's own if one is waiting, else
// the first to come of its own or the role's. The pull on the role's
// consumer is open only while the agent is idle, so a task any worker
// could take does not sit with this one while it is busy; a task of the
// role handed over just as one of its own came is returned too (and run
// next). The error is the pull's; a pull that expired, or was dropped on
// a reconnect, returns nothing and no error.
func (a *Agent) next(ctx context.Context, q *queue) ([]held, error) {
	select {
	case h := <-q.owned:
		return []held{h}, nil
	default:
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type pulled struct {
		m   jetstream.Msg
		err error
	}
	ch := make(chan pulled, 1)
	go func() {
		m, err := a.pull(pctx, q.shared)
		ch <- pulled{m, err}
	}()
	select {
	case h := <-q.owned:
		cancel()
		out := []held{h}
		if p := <-ch; p.m != nil {
			out = append(out, q.hold(p.m))
		}
		return out, nil
	case p := <-ch:
		if p.m == nil {
			return nil, p.err
		}
		return []held{q.hold(p.m)}, nil
	}
}

// pull asks c for one task and waits for it until the bus's expiry
// (nothing, no error), ctx's end, or a reconnect: a restarted bus forgot
// the pull, so it is dropped to be asked again at once.
func (a *Agent) pull(ctx context.Context, c jetstream.Consumer) (jetstream.Msg, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	back := a.reconnect()
	go func() {
		select {
		case <-back:
			cancel()
		case <-pctx.Done():
		}
	}()
	m, err := c.Next(jetstream.FetchContext(pctx))
	switch {
	case m != nil:
		return m, nil
	case errors.Is(err, context.Canceled), errors.Is(err, nats.ErrTimeout):
		return nil, nil
	}
	return nil, fmt.Errorf("pulling a task from %s: %w", c.CachedInfo().Name, err)
}
