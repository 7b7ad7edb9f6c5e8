package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/bus/wire"
)

// What the operator (flockctl) does with tasks: hand one to the flock,
// wait for a result, list what the bus holds. The connection must be the
// operator's; agents may not read the streams.

// Sent is what the bus said when it stored a task.
type Sent struct {
	Seq       uint64 // the task's place in wire.TasksStream
	Duplicate bool   // a task with the same id was sent within TaskDedupWindow: this one was not stored
	At        time.Time
}

// SendTask stores a task on subject with id as its task id and
// deduplication id, and returns once the bus confirmed it.
func SendTask(ctx context.Context, nc *nats.Conn, subject, id string, payload []byte) (Sent, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return Sent{}, fmt.Errorf("sending task %s: %w", id, err)
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(wire.TaskIDHeader, id)
	msg.Header.Set(wire.MsgIDHeader, id)
	msg.Data = payload
	at := time.Now()
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return Sent{}, fmt.Errorf("task %s on %s: the bus did not store it: %w", id, subject, err)
	}
	return Sent{Seq: ack.Sequence, Duplicate: ack.Duplicate, At: at}, nil
}

// WaitResult waits until ctx ends for the result of task id stored at or
// after since, and returns it. It reads wire.ResultsStream (headers first,
// the body of the one result that matches), so a result stored before the
// call is found too.
func WaitResult(ctx context.Context, nc *nats.Conn, id string, since time.Time) (wire.Result, error) {
	var res wire.Result
	js, err := jetstream.New(nc)
	if err != nil {
		return res, fmt.Errorf("waiting for the result of task %s: %w", id, err)
	}
	results, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		return res, fmt.Errorf("waiting for the result of task %s: stream %s: %w", id, wire.ResultsStream, err)
	}
	start := since.Add(-time.Second) // the store's clock is this host's; a margin for its steps
	cons, err := results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &start,
		HeadersOnly:   true,
	})
	if err != nil {
		return res, fmt.Errorf("waiting for the result of task %s: reading stream %s: %w", id, wire.ResultsStream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return res, fmt.Errorf("waiting for the result of task %s: reading stream %s: %w", id, wire.ResultsStream, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return res, fmt.Errorf("waiting for the result of task %s: %w", id, err)
		}
		if m.Headers().Get(wire.TaskIDHeader) != id {
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			return res, fmt.Errorf("the result of task %s: %w", id, err)
		}
		raw, err := results.GetMsg(ctx, md.Sequence.Stream)
		if err != nil {
			return res, fmt.Errorf("reading the result of task %s: %w", id, err)
		}
		if res, err = wire.ParseResult(raw.Header, raw.Data); err != nil {
			return res, fmt.Errorf("task %s: %w", id, err)
		}
		return res, nil
	}
}

// Idle reports whether some worker is waiting on consumer for a task right
// now; false means all are busy or none is connected, and a task waits.
func Idle(ctx context.Context, nc *nats.Conn, consumer string) (bool, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err
	}
	c, err := js.Consumer(ctx, wire.TasksStream, consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", consumer, err)
	}
	return c.CachedInfo().NumWaiting > 0, nil
}
