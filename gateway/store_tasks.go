package gateway

import (
	"maps"
	"slices"
	"time"

	"github.com/flockrun/flock/wire"
)

// The store keeps each task's spend beside its agent's counts, from the
// same log lines (a request charged to a task carries its place in the
// tasks' stream), so a proxy killed at any point comes back with both,
// and they agree: the sum over an agent's tasks is what it spent while it
// held them.

// taskCount is one task's spend, when it was last charged, and when its
// result was stored (zero: not yet).
type taskCount struct {
	Seq   uint64         `json:"seq"`
	Spend wire.TaskSpend `json:"spend"`
	Last  time.Time      `json:"last"`
	Done  time.Time      `json:"done,omitzero"`
}

// How long a task's spend is kept: after its result was stored, for an
// answer the desk may ask again; else after its last request, for a task
// still held or sent again.
const (
	taskKeepDone = time.Hour
	taskKeepIdle = 7 * 24 * time.Hour
)

func (s *Store) task(seq uint64) *taskCount {
	t := s.tasks[seq]
	if t == nil {
		t = &taskCount{Seq: seq}
		s.tasks[seq] = t
	}
	return t
}

// applyTask charges a logged request to its task, or marks the task out
// of its budget: part of apply, the one code for now and replay.
func (s *Store) applyTask(l logLine, at time.Time) {
	t := s.task(l.Task)
	if l.OOB != "" {
		if b, err := wire.ParseTaskBudget(l.OOB); err == nil {
			t.Spend.Budget = &b
		}
		t.Spend.OutOfBudget = true
		return
	}
	t.Spend.Requests++
	t.Spend.Tokens.Add(l.tokens())
	t.Spend.Cost += l.USD
	t.Last = at
}

// Task is what the task at seq spent here (zero if nothing).
func (s *Store) Task(seq uint64) wire.TaskSpend {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[seq]
	if t == nil {
		return wire.TaskSpend{}
	}
	out := t.Spend
	if t.Spend.Budget != nil {
		b := *t.Spend.Budget
		out.Budget = &b
	}
	return out
}

// SetTaskBudget says which budget the task at seq is held to (the last
// its requests were judged by), for its spend to name.
func (s *Store) SetTaskBudget(seq uint64, b wire.TaskBudget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.task(seq); t.Spend.Budget == nil || *t.Spend.Budget != b {
		t.Spend.Budget = &b
	}
}

// TaskOutOfBudget records that a request of the task at seq was refused
// past its budget b: logged, so its result says so after a restart too.
func (s *Store) TaskOutOfBudget(seq uint64, b wire.TaskBudget, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[seq]; t != nil && t.Spend.OutOfBudget {
		return nil
	}
	s.seq++
	l := logLine{Seq: s.seq, At: at.UnixNano(), Task: seq, OOB: b.String()}
	s.applyTask(l, at)
	return s.append(l)
}

// TaskDone marks the task at seq finished (its result stored): its spend
// is kept a while longer, for an answer asked again.
func (s *Store) TaskDone(seq uint64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[seq]; t != nil && t.Done.IsZero() {
		t.Done = at
	}
}

// pruneTasks forgets the tasks done long enough ago, or charged nothing
// for long.
func (s *Store) pruneTasks(now time.Time) {
	for seq, t := range s.tasks {
		if !t.Done.IsZero() && now.Sub(t.Done) > taskKeepDone || now.Sub(t.Last) > taskKeepIdle {
			delete(s.tasks, seq)
		}
	}
}

// tasksList is the tasks for a snapshot, in stream order.
func (s *Store) tasksList() []taskCount {
	out := make([]taskCount, 0, len(s.tasks))
	for _, seq := range slices.Sorted(maps.Keys(s.tasks)) {
		out = append(out, *s.tasks[seq])
	}
	return out
}
