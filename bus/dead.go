package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/wire"
)

// maxDeliveriesAdvisory is what the server says when a task was handed out
// max_deliveries times without being acknowledged.
const maxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + wire.TasksStream + ".*"

// The server says it once, whether or not the bus listens, and forgets:
// so the advisories are kept in a stream of their own (givenUpStream)
// that the bus works through with a durable consumer. One the bus had
// not finished when it died is redelivered when it starts again.
const (
	givenUpStream   = "GIVEN_UP"
	givenUpConsumer = "bus"
)

// deadTimeout bounds moving one task to the dead letters.
const deadTimeout = 10 * time.Second

// watchGivenUp makes the bus take every advisory kept in givenUpStream,
// now and from now on, until Shutdown.
func (s *Server) watchGivenUp(ctx context.Context) error {
	cons, err := s.js.CreateOrUpdateConsumer(ctx, givenUpStream, jetstream.ConsumerConfig{
		Durable:     givenUpConsumer,
		Description: "the bus dead-letters each task named",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     DefaultAckWait,
	})
	if err != nil {
		return fmt.Errorf("creating or updating consumer %s of stream %s: %w", givenUpConsumer, givenUpStream, err)
	}
	cc, err := cons.Consume(s.onGivenUp)
	if err != nil {
		return fmt.Errorf("taking messages from stream %s: %w", givenUpStream, err)
	}
	s.givenUp = cc
	return nil
}

// onGivenUp moves the task the advisory names to the dead letters. The
// server gives up on it but keeps it in TASKS (a work queue drops a
// message only when acknowledged): left there, it would never get an
// outcome.
func (s *Server) onGivenUp(m jetstream.Msg) {
	var adv server.JSConsumerDeliveryExceededAdvisory
	if err := json.Unmarshal(m.Data(), &adv); err != nil {
		s.log.Errorf("a max-deliveries advisory that is not JSON (%v), dropped: %q", err, m.Data())
		_ = m.Term()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadTimeout)
	defer cancel()
	if err := s.deadLetter(ctx, adv.Consumer, adv.StreamSeq, adv.Deliveries); err != nil {
		delay := retryDelay(m)
		s.log.Errorf("dead-lettering task %d of consumer %s: %v (trying again in %s)", adv.StreamSeq, adv.Consumer, err, delay)
		_ = m.NakWithDelay(delay)
		return
	}
	if err := m.Ack(); err != nil {
		s.log.Warnf("acknowledging the advisory of task %d: %v (it will be dead-lettered again, once)", adv.StreamSeq, err)
	}
}

// retryDelay doubles from a second to five minutes with each delivery of m.
func retryDelay(m jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := m.Metadata(); err == nil {
		n = md.NumDelivered
	}
	return min(time.Second<<min(n-1, 9), 5*time.Minute)
}

// deadLetter copies the task at seq in TASKS to DEAD, stores a failed
// result for it and deletes it from TASKS, in that order: if the bus dies
// in between, the next start does it again, and the deduplication ids
// keep one copy and one result.
func (s *Server) deadLetter(ctx context.Context, consumer string, seq uint64, deliveries uint64) error {
	tasks, err := s.js.Stream(ctx, wire.TasksStream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", wire.TasksStream, err)
	}
	raw, err := tasks.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // acknowledged after all, or already moved
	}
	if err != nil {
		return fmt.Errorf("reading the task: %w", err)
	}
	id := wire.TaskID(raw.Header, seq)
	dead := nats.NewMsg(wire.DeadSubject)
	for k, v := range raw.Header {
		// The sender's own headers go along; JetStream's (an expected
		// stream, a rollup) would make DEAD refuse the copy.
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			dead.Header[k] = v
		}
	}
	dead.Header.Set(wire.TaskIDHeader, id)
	dead.Header.Set(wire.TaskSubjectHeader, raw.Subject)
	dead.Header.Set(wire.DeliveriesHeader, strconv.FormatUint(deliveries, 10))
	dead.Header.Set(wire.MsgIDHeader, wire.DeadMsgID(id))
	dead.Data = raw.Data
	if _, err := s.js.PublishMsg(ctx, dead); err != nil {
		return fmt.Errorf("storing task %s in %s: %w", id, wire.DeadStream, err)
	}
	h, body, err := wire.ResultMessage(id, raw.Subject, wire.Result{
		TaskID:     id,
		ExitStatus: -1,
		Error: fmt.Sprintf("dead-lettered after %d deliveries: no worker stored a result (consumer %s); the task is kept in %s",
			deliveries, consumer, wire.DeadStream),
	})
	if err != nil {
		return err
	}
	if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: wire.ResultSubject, Header: h, Data: body}); err != nil {
		return fmt.Errorf("storing the failed result of task %s: %w", id, err)
	}
	if err := tasks.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("deleting task %s from %s: %w", id, wire.TasksStream, err)
	}
	s.taskGone(seq)
	msg := fmt.Sprintf("task %s (%s) dead-lettered after %d deliveries", id, raw.Subject, deliveries)
	s.log.record("[WRN]", msg, events.Record{Kind: events.DeadLettered, Agent: consumerAgent(consumer), Detail: msg,
		Extra: map[string]string{"TASK_ID": id, "DELIVERIES": strconv.FormatUint(deliveries, 10)}})
	return nil
}
