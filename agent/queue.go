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

// The agent takes tasks from the bus's task desk: it asks on
// agent.N.task.next and the desk hands it a task with a lease, which it
// shows with every word about that task (progress, result, release). It
// never touches JetStream itself.

// askWait is how long one ask waits at the desk; askMargin how much
// longer the agent waits for its answer before taking it for lost.
const (
	askWait   = wire.DefaultNextWait
	askMargin = 5 * time.Second
	// withdrawWait bounds waiting for the one answer of a withdrawn ask.
	withdrawWait = time.Second
	// deskTimeout bounds waiting for the desk to store a result;
	// releaseTimeout for it to take a task back (unanswered, the task
	// goes back after the ack wait anyway).
	deskTimeout    = 15 * time.Second
	releaseTimeout = 2 * time.Second
)

// held is a task in the agent's hands, kept alive from the moment it came
// until stop.
type held struct {
	t    wire.Handed
	stop func()
}

func (a *Agent) hold(t wire.Handed) held {
	every := t.AckWait / 3
	if every <= 0 {
		every = 10 * time.Second
	}
	return held{t, a.keepAlive(t, every)}
}

// ask asks the desk for a task and waits for its answer: the task, or
// nil when none came within askWait. When ctx ends or the bus reconnects
// (a restarted bus forgot the ask), the ask is withdrawn; a task that was
// on its way all the same is given back if ctx ended, else returned.
func (a *Agent) ask(ctx context.Context) (*wire.Handed, error) {
	inbox := a.nc.NewInbox()
	// Its one answer (and the answer to a withdrawal): a channel of two,
	// not SubscribeSync's, which allocates room for 65536 messages (512
	// KiB, zeroed) on every ask, and was a tenth of a busy bus's CPU.
	answers := make(chan *nats.Msg, 2)
	sub, err := a.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, fmt.Errorf("asking the bus for a task: %w", err)
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(wire.NextRequest{WaitMS: askWait.Milliseconds()})
	back := a.reconnect()
	if err := a.nc.PublishMsg(&nats.Msg{Subject: wire.Desk(a.env.ID, wire.DeskNext), Reply: inbox, Data: body}); err != nil {
		return nil, fmt.Errorf("asking the bus for a task: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, askWait+askMargin)
	defer cancel()
	go func() {
		select {
		case <-back:
			cancel()
		case <-wctx.Done():
		}
	}()
	m, err := nextAnswer(wctx, answers)
	if err != nil {
		// Withdrawn: the desk answers the ask now, if it still knows it
		// (a bus that is away does not).
		if !a.nc.IsConnected() {
			// A task answered just before the bus went is still taken.
			if m, err = nextAnswerWithin(answers, time.Millisecond); err != nil {
				return nil, nil
			}
		} else {
			w, _ := json.Marshal(wire.NextRequest{Withdraw: inbox})
			_ = a.nc.PublishMsg(&nats.Msg{Subject: wire.Desk(a.env.ID, wire.DeskNext), Reply: a.nc.NewInbox(), Data: w})
			if m, err = nextAnswerWithin(answers, withdrawWait); err != nil {
				return nil, nil
			}
		}
	}
	t, ok, err := wire.ParseHanded(m.Header, m.Data)
	if err != nil || !ok {
		return nil, err
	}
	if ctx.Err() != nil {
		a.giveBack(t, "the agent is stopping")
		return nil, nil
	}
	return &t, nil
}

// nextAnswer is the next message on answers, or ctx's error.
func nextAnswer(ctx context.Context, answers <-chan *nats.Msg) (*nats.Msg, error) {
	select {
	case m := <-answers:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func nextAnswerWithin(answers <-chan *nats.Msg, d time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return nextAnswer(ctx, answers)
}

// deskRequest sends verb about task t to the desk and waits for its
// answer, until timeout or a reconnect (a request sent to a bus that went
// away is never answered; errReconnected says to send it again); a
// refusal is a *wire.Refusal.
func (a *Agent) deskRequest(t wire.Handed, verb string, body []byte, timeout time.Duration) error {
	m := nats.NewMsg(wire.Desk(a.env.ID, verb))
	m.Header.Set(wire.LeaseHeader, t.Lease)
	m.Data = body
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	back := a.reconnect()
	go func() {
		select {
		case <-back:
			cancel()
		case <-ctx.Done():
		}
	}()
	ans, err := a.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		select {
		case <-back:
			return fmt.Errorf("%w (%v)", errReconnected, err)
		default:
		}
		return err
	}
	if r := wire.ParseRefusal(ans.Header); r != nil {
		return r
	}
	return nil
}

// errReconnected: the bus reconnected while a request waited for its answer.
var errReconnected = errors.New("the bus reconnected before answering")

// refused is the refusal kind of err, "" if the desk did not refuse.
func refused(err error) string {
	var r *wire.Refusal
	if errors.As(err, &r) {
		return r.Kind
	}
	return ""
}
