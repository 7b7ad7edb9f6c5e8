package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/wire"
)

// TaskState is where a task is.
type TaskState string

const (
	Pending TaskState = "pending" // queued, not handed to a worker yet
	Running TaskState = "running" // handed to a worker, no result stored yet (or waiting to be handed out again)
	Done    TaskState = "done"    // its result is stored
	Dead    TaskState = "dead"    // no worker finished it within max_deliveries; a failed result is stored
)

// TaskEntry is one task as ListTasks sees it.
type TaskEntry struct {
	ID         string    `json:"id"`
	State      TaskState `json:"state"`
	Subject    string    `json:"subject"`              // where it was sent
	Agent      int       `json:"agent,omitempty"`      // done: who stored the result (0: the bus); running: the agent it was addressed to
	Holder     int       `json:"holder,omitempty"`     // running: the worker holding it now, as the bus's task desk says (0: none, it waits to be handed out again)
	OK         *bool     `json:"ok,omitempty"`         // done: whether it succeeded
	Error      string    `json:"error,omitempty"`      // done: why it failed
	Deliveries uint64    `json:"deliveries,omitempty"` // dead: how often it was handed out
	Time       time.Time `json:"time"`                 // pending, running: when sent; done, dead: when it ended
	Note       string    `json:"note,omitempty"`       // what the operator should know
	// Spend is what its model requests spent: done, as its result keeps
	// it; running, so far, as flock-proxy says (AddSpend). Absent when
	// not known.
	Spend *wire.TaskSpend `json:"spend,omitempty"`
	seq   uint64          // queued: its place in wire.TasksStream
}

// ListTasks is every task in wire.TasksStream, oldest first, then the
// last limit results and the last limit dead letters, newest first. In a
// cluster, servers names the hosts whose desks say which tasks their
// workers hold (a host that does not answer shows none held); none: the
// one bus of a single host.
func ListTasks(ctx context.Context, nc *nats.Conn, limit int, servers ...string) ([]TaskEntry, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	queued, err := listQueued(ctx, js)
	if err != nil {
		return nil, err
	}
	holders := map[uint64]wire.Held{}
	for _, server := range append(servers, "")[:max(len(servers), 1)] {
		subj := wire.OnServer(wire.HeldSubject, server)
		msg, err := nc.RequestWithContext(ctx, subj, nil)
		if err != nil && server != "" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("asking the task desk which tasks are held (%s): %w", subj, err)
		}
		held, err := wire.ParseHeld(msg.Data)
		if err != nil {
			return nil, err
		}
		maps.Copy(holders, held.BySeq())
	}
	for i := range queued {
		if h, ok := holders[queued[i].seq]; ok && queued[i].State == Running {
			queued[i].Holder = h.Agent
		}
	}
	done, err := listNewest(ctx, js, wire.ResultsStream, limit, doneEntry)
	if err != nil {
		return nil, err
	}
	dead, err := listNewest(ctx, js, wire.DeadStream, limit, deadEntry)
	if err != nil {
		return nil, err
	}
	return append(append(queued, done...), dead...), nil
}

// listQueued reads the tasks still in the work queue. One a consumer has
// delivered (its sequence at or below the consumer's delivered one) is
// running; the others are pending.
func listQueued(ctx context.Context, js jetstream.JetStream) ([]TaskEntry, error) {
	tasks, err := js.Stream(ctx, wire.TasksStream)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: stream %s: %w", wire.TasksStream, err)
	}
	delivered := map[string]uint64{} // filter subject -> highest stream sequence handed out
	infos := tasks.ListConsumers(ctx)
	for ci := range infos.Info() {
		delivered[ci.Config.FilterSubject] = ci.Delivered.Stream
	}
	if err := infos.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of stream %s: %w", wire.TasksStream, err)
	}
	var out []TaskEntry
	for seq := uint64(1); ; {
		raw, err := tasks.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(wire.TasksAll))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading stream %s at %d: %w", wire.TasksStream, seq, err)
		}
		e := TaskEntry{ID: wire.TaskID(raw.Header, raw.Sequence), State: Pending, Subject: raw.Subject, Time: raw.Time, seq: raw.Sequence}
		d, ok := delivered[raw.Subject]
		switch {
		case !ok:
			e.Note = "no worker takes " + raw.Subject
		case raw.Sequence <= d:
			e.State = Running
			e.Agent, _ = wire.AddressedTo(raw.Subject)
		}
		out = append(out, e)
		seq = raw.Sequence + 1
	}
}

// listNewest reads up to limit messages of stream, newest first, as
// entries.
func listNewest(ctx context.Context, js jetstream.JetStream, name string, limit int, entry func(*jetstream.RawStreamMsg) TaskEntry) ([]TaskEntry, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: stream %s: %w", name, err)
	}
	var out []TaskEntry
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && len(out) < limit; seq-- {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // aged out meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading stream %s at %d: %w", name, seq, err)
		}
		out = append(out, entry(raw))
	}
	return out, nil
}

func doneEntry(raw *jetstream.RawStreamMsg) TaskEntry {
	e := TaskEntry{ID: raw.Header.Get(wire.TaskIDHeader), State: Done, Subject: raw.Header.Get(wire.TaskSubjectHeader), Time: raw.Time}
	res, err := wire.ParseResult(raw.Header, raw.Data)
	if err != nil {
		e.Note = err.Error()
		return e
	}
	if e.ID == "" {
		e.ID = res.TaskID
	}
	e.Agent, e.OK, e.Error, e.Spend = res.Agent, &res.OK, res.Error, res.Spend
	return e
}

func deadEntry(raw *jetstream.RawStreamMsg) TaskEntry {
	n, _ := strconv.ParseUint(raw.Header.Get(wire.DeliveriesHeader), 10, 64)
	return TaskEntry{ID: raw.Header.Get(wire.TaskIDHeader), State: Dead, Subject: raw.Header.Get(wire.TaskSubjectHeader),
		Deliveries: n, Time: raw.Time}
}
