package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/wire"
)

// Sent is what the bus said when it stored a task.
type Sent struct {
	Seq       uint64 // the task's place in wire.TasksStream
	Duplicate bool   // a task with the same id was sent within wire.TaskDedupWindow: this one was not stored
	At        time.Time
}

// NotStoredError is the bus's refusal of a task it could not keep: this
// host's side of a split cluster has no majority of the tasks' stream
// (wire.NoQuorumReply).
type NotStoredError struct {
	ID, Why string
	// Unsure: a leader that lost its majority took it (or the send was
	// not answered, and the bus said why only after), and may still
	// store it once the hosts are back; sent again with the same id it
	// is stored once.
	Unsure bool
}

func (e *NotStoredError) Error() string {
	if e.Unsure {
		return fmt.Sprintf("task %s may not be stored: %s", e.ID, e.Why)
	}
	return fmt.Sprintf("task %s was not stored: %s", e.ID, e.Why)
}

// SendTask stores a task on subject with id as its task id and
// deduplication id, and returns once the bus confirmed it.
func SendTask(ctx context.Context, nc *nats.Conn, subject, id string, payload []byte) (Sent, error) {
	return SendTaskWithin(ctx, nc, subject, id, payload, wire.TaskBudget{})
}

// SendTaskWithin is SendTask with the task's own budget, if it sets any
// (wire.TaskBudgetHeader): its model requests are held to it beside their
// worker's task_budget.
func SendTaskWithin(ctx context.Context, nc *nats.Conn, subject, id string, payload []byte, budget wire.TaskBudget) (Sent, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return Sent{}, fmt.Errorf("sending task %s: %w", id, err)
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(wire.TaskIDHeader, id)
	msg.Header.Set(wire.MsgIDHeader, id)
	if budget.Any() {
		msg.Header.Set(wire.TaskBudgetHeader, budget.String())
	}
	msg.Data = payload
	at := time.Now()
	ack, err := js.PublishMsg(ctx, msg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		if why, maybe, ok := wire.ParseNoQuorum(int(apiErr.ErrorCode), apiErr.Description); ok {
			return Sent{}, &NotStoredError{ID: id, Why: why, Unsure: maybe}
		}
	}
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
	// In a cluster a pull sent the moment its consumer is made is now and
	// then lost: the consumer's leader may sit on another server, and
	// that server's interest in the pull subject has not reached this one
	// yet (about 2 waits in 100 took 10 s, two missed 5 s heartbeats, for
	// a result stored in 20 ms: TestCluster, TestClusterWaitResultAcrossHosts).
	// A short heartbeat (the least nats.go takes) notices within a second and pulls again, silently.
	cons, err := results.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return res, fmt.Errorf("waiting for the result of task %s: reading stream %s: %w", id, wire.ResultsStream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = results.DeleteConsumer(dctx, cons.CachedInfo().Name) // else it goes after InactiveThreshold
	}()
	it, err := cons.Messages(jetstream.PullHeartbeat(500*time.Millisecond), jetstream.WithMessagesErrOnMissingHeartbeat(false))
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
		raw, err := getStored(ctx, results, md.Sequence.Stream)
		if err != nil {
			return res, fmt.Errorf("reading the result of task %s: %w", id, err)
		}
		if res, err = wire.ParseResult(raw.Header, raw.Data); err != nil {
			return res, fmt.Errorf("task %s: %w", id, err)
		}
		return res, nil
	}
}

// getStored reads the message at seq, which a consumer has just
// delivered. In a cluster the consumer may read one copy of the stream and
// the get be answered from another that has not applied it yet ("message
// not found" for a result delivered 3 ms before): that is asked again.
func getStored(ctx context.Context, s jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		raw, err := s.GetMsg(ctx, seq)
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return raw, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
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
