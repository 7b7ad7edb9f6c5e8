package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/wire"
)

// taskShares counts what each agent sent into TASKS that is still there:
// its tasks waiting or running, and their bytes as the stream counts
// them. The desk reserves a task's place before it stores it (so sends in
// flight count too), keeps it once stored, and gives it back when the
// task leaves: its result stored and the task acknowledged, or
// dead-lettered. At start the count is read from the stream itself (each
// task names its sender, wire.SenderHeader). A task removed by hand (the
// operator's JetStream API) is seen when the stream's first sequence
// passes it; one deleted from the middle, at the next start.
type taskShares struct {
	mu   sync.Mutex
	seqs map[uint64]taskEntry // agents' tasks in TASKS, by stream sequence
	use  map[int]shareUse     // by agent: stored and in flight
}

type taskEntry struct {
	agent int
	size  int64
}

// shareUse is an agent's tasks and their bytes.
type shareUse struct {
	n     int
	bytes int64
}

func newTaskShares() *taskShares {
	return &taskShares{seqs: map[uint64]taskEntry{}, use: map[int]shareUse{}}
}

// reserve takes size bytes and one task of agent's share (at most n
// tasks and bytes), or says what it holds if that would exceed it.
func (t *taskShares) reserve(agent int, size int64, n int, bytes int64) (shareUse, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.use[agent]
	if u.n+1 > n || u.bytes+size > bytes {
		return u, false
	}
	t.use[agent] = shareUse{u.n + 1, u.bytes + size}
	return u, true
}

// release gives back a reservation that stored nothing (a duplicate, a
// refusal, a lost answer).
func (t *taskShares) release(agent int, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(agent, size)
}

func (t *taskShares) dropLocked(agent int, size int64) {
	u := t.use[agent]
	u.n, u.bytes = max(u.n-1, 0), max(u.bytes-size, 0)
	if u.n == 0 {
		delete(t.use, agent)
		return
	}
	t.use[agent] = u
}

// stored makes a reservation a task at seq.
func (t *taskShares) stored(seq uint64, agent int, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seqs[seq] = taskEntry{agent, size}
}

// gone gives back the share of the task at seq, if an agent sent it; a
// second word of the same task does nothing.
func (t *taskShares) gone(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.seqs[seq]; ok {
		delete(t.seqs, seq)
		t.dropLocked(e.agent, e.size)
	}
}

// before gives back the shares of tasks before the stream's first
// sequence: removed without the bus (a purge).
func (t *taskShares) before(first uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for seq, e := range t.seqs {
		if seq < first {
			delete(t.seqs, seq)
			t.dropLocked(e.agent, e.size)
		}
	}
}

// of is agent's use now.
func (t *taskShares) of(agent int) shareUse {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.use[agent]
}

// load replaces the count with what the stream holds (reservations in
// flight are kept: they are not in the stream yet).
func (t *taskShares) load(seqs map[uint64]taskEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.seqs {
		t.dropLocked(e.agent, e.size)
	}
	t.seqs = seqs
	for _, e := range seqs {
		u := t.use[e.agent]
		t.use[e.agent] = shareUse{u.n + 1, u.bytes + e.size}
	}
}

// taskSize is a task's bytes as JetStream's file store counts them (its
// record: length, sequence, time, subject, headers, payload, hash), so
// the shares add up as the stream's bound does.
func taskSize(subject string, h map[string][]string, data []byte) int64 {
	hlen := 0
	if len(h) > 0 {
		hlen = len("NATS/1.0\r\n") + len("\r\n")
		for k, vs := range h {
			for _, v := range vs {
				hlen += len(k) + len(": ") + len(v) + len("\r\n")
			}
		}
		hlen += 4
	}
	return int64(22 + len(subject) + hlen + len(data) + 8)
}

// taskGone gives back the share of the task at seq, here and, through
// wire.TaskGoneSubject, on every other host's bus: in a cluster the task
// may be done on another host than its sender's.
func (s *Server) taskGone(seq uint64) {
	s.shares.gone(seq)
	if s.cluster == nil {
		return // one bus: it knows
	}
	if err := s.nc.Publish(wire.TaskGoneSubject, strconv.AppendUint(nil, seq, 10)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Warnf("telling the other buses task %d is done: %v", seq, err)
	}
}

// onTaskGone hears a bus say a task left TASKS.
func (s *Server) onTaskGone(m *nats.Msg) {
	if seq, err := strconv.ParseUint(string(m.Data), 10, 64); err == nil {
		s.shares.gone(seq)
	}
}

// readTaskShares reads every task in TASKS an agent sent.
func (s *Server) readTaskShares(ctx context.Context) (map[uint64]taskEntry, error) {
	stream, err := s.js.Stream(ctx, wire.TasksStream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", wire.TasksStream, err)
	}
	st := stream.CachedInfo().State
	out := map[uint64]taskEntry{}
	for seq, n := st.FirstSeq, uint64(0); n < st.Msgs && seq <= st.LastSeq; n++ {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(wire.TasksAll))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tasks' senders from %s at %d: %w", wire.TasksStream, seq, err)
		}
		if id, err := strconv.Atoi(m.Header.Get(wire.SenderHeader)); err == nil && id > 0 {
			out[m.Sequence] = taskEntry{id, taskSize(m.Subject, m.Header, m.Data)}
		}
		seq = m.Sequence + 1
	}
	return out, nil
}
