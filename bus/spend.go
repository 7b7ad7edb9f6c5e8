package bus

import (
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// The cost of each task (wire/taskspend.go): flock-proxy's gateway asks
// the desk which tasks a worker holds, to charge its model requests to
// them, and the desk asks the proxy what a task spent when it stores the
// task's result.

// spendTimeout bounds asking flock-proxy for a task's spend: a result is
// stored without it rather than wait on the proxy.
const spendTimeout = 3 * time.Second

// taskBudget is the budget task id carries in h, nil if none. A
// malformed one (the desk refuses it on a send, but the operator stores
// tasks around the desk) is logged and taken as none.
func (d *desk) taskBudget(h nats.Header, id string) *wire.TaskBudget {
	b, err := wire.TaskBudgetOf(h)
	if err != nil {
		d.s.log.Warnf("the task desk: task %s runs with no budget of its own: %v", id, err)
	}
	return b
}

// onLeases answers flock-proxy's wire.LeasesSubject request with the
// tasks the agent holds. Every bus of a cluster hears it; the agent's
// host's answers.
func (d *desk) onLeases(m *nats.Msg) {
	id, ok := wire.AgentOf(m.Subject, wire.LeasesSubjects)
	if !ok || !d.s.local(id) {
		return
	}
	d.answerHeld(m, id)
}

// spend is what task id, at seq, of agent spent, as flock-proxy counted
// it; nil if the proxy did not answer within spendTimeout (at once when
// none listens), logged, or if the agent is granted no model API.
func (d *desk) spend(agent int, seq uint64, id string) *wire.TaskSpend {
	if !d.s.isMetered(agent) {
		return nil
	}
	subj := wire.TaskSpendSubject(agent)
	m, err := d.s.nc.Request(subj, wire.EncodeTaskSpendRequest(wire.TaskSpendRequest{Seq: seq, Final: true}), spendTimeout)
	if err != nil {
		d.s.log.Warnf("the task desk: the result of task %s is stored without its spend: flock-proxy did not answer on %s (%v)", id, subj, err)
		return nil
	}
	s, err := wire.ParseTaskSpend(m.Data)
	if err != nil {
		d.s.log.Warnf("the task desk: the result of task %s is stored without its spend: flock-proxy answered on %s: %v", id, subj, err)
		return nil
	}
	return &s
}

// isMetered says whether agent's model requests are charged to its
// tasks in the config in force.
func (s *Server) isMetered(agent int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := slices.BinarySearch(s.cfg.Tasks.Metered, agent)
	return ok
}
