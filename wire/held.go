package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// HeldSubject asks the bus's task desk which tasks workers hold now: the
// request's body is empty, the answer HeldTasks. Only the operator may
// publish on flock.bus.*.
const HeldSubject = "flock.bus.held"

// Held is one task a worker holds: its latest delivery, handed to Agent
// and neither released nor done.
type Held struct {
	Seq         uint64    `json:"seq"` // its place in TasksStream
	ID          string    `json:"id"`
	Agent       int       `json:"agent"`
	Delivery    uint64    `json:"delivery"` // 1 the first time it was handed out
	DeliveredAt time.Time `json:"delivered_at"`
	// Budget is the task's own (TaskBudgetHeader), if it has one.
	Budget *TaskBudget `json:"budget,omitempty"`
}

// HeldTasks is the desk's answer, by stream sequence.
type HeldTasks struct {
	Tasks []Held `json:"tasks"`
}

// EncodeHeld and ParseHeld are the answer on the wire.
func EncodeHeld(h HeldTasks) ([]byte, error) {
	if h.Tasks == nil {
		h.Tasks = []Held{}
	}
	return json.Marshal(h)
}

func ParseHeld(data []byte) (HeldTasks, error) {
	var h HeldTasks
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("%s answered %q: %w", HeldSubject, data, err)
	}
	return h, nil
}

// HeldBy is the desk's answer on LeasesSubject(agent): the tasks agent
// holds, refused whole if the answer names any other agent's.
func HeldBy(agent int, data []byte) ([]Held, error) {
	h, err := ParseHeld(data)
	if err != nil {
		return nil, err
	}
	for _, t := range h.Tasks {
		if t.Agent != agent {
			return nil, fmt.Errorf("%s answered a task of agent %d", LeasesSubject(agent), t.Agent)
		}
	}
	return h.Tasks, nil
}

// BySeq is h's holders by stream sequence.
func (h HeldTasks) BySeq() map[uint64]Held {
	m := make(map[uint64]Held, len(h.Tasks))
	for _, t := range h.Tasks {
		m[t.Seq] = t
	}
	return m
}
