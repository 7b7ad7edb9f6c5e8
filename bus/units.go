package bus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Units is where the bus reads its host's agents' units for
// wire.UnitsSubject: systemd over the system bus in flock.service (read-only,
// as /metrics; cmd/flockctl adapts units.Observer), a fake in tests.
type Units interface {
	// States is each named unit as systemd has it (Unit, ActiveState,
	// SubState; Restarts and the last exit while it is not inactive). A
	// unit systemd does not have is absent from the map.
	States(ctx context.Context, names []string) (map[string]wire.AgentUnit, error)
}

// unitsTimeout bounds one answer's reads: flockctl waits 2 s for every
// host, and an answer without units beats none.
const unitsTimeout = 1500 * time.Millisecond

// answerUnits subscribes the bus's own client to wire.UnitsSubject: a
// plain subscription, so every bus of a cluster answers for its host.
func (s *Server) answerUnits(nc *nats.Conn) error {
	if _, err := nc.Subscribe(wire.UnitsSubject, s.onUnits); err != nil {
		return fmt.Errorf("subscribing the bus's own client to %s: %w", wire.UnitsSubject, err)
	}
	return nil
}

func (s *Server) onUnits(m *nats.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), unitsTimeout)
	defer cancel()
	data, err := wire.EncodeUnits(s.HostUnits(ctx))
	if err != nil {
		s.log.Errorf("encoding the units answer: %v", err)
		return
	}
	s.respond(m, data)
}

// HostUnits is this host's agents' units, what the bus saw of each, and
// the tasks its desk has handed out.
func (s *Server) HostUnits(ctx context.Context) wire.HostUnits {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	host, ids := localAgents(cfg)
	out := wire.HostUnits{Host: host, Agents: make(map[int]wire.AgentUnit, len(ids))}
	onBus := s.Status().Agents
	out.Held = s.desk.heldTasks(0).Tasks
	for _, id := range ids {
		out.Agents[id] = wire.AgentUnit{Bus: onBus[id]}
	}
	if s.opts.Units == nil {
		out.Error = "this bus reads no units (started without a units reader)"
		return out
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = spec.UnitName(id)
	}
	states, err := s.opts.Units.States(ctx, names)
	if err != nil {
		out.Error = fmt.Sprintf("reading the units over D-Bus: %v", err)
	}
	for _, id := range ids {
		if st, ok := states[spec.UnitName(id)]; ok {
			st.Bus = out.Agents[id].Bus
			out.Agents[id] = st
		}
	}
	return out
}

// localAgents is this host's name and its agents' ids, sorted: the
// agents Cluster.Hosts places on Cluster.Server; without a cluster, ""
// and every agent of c.
func localAgents(c Config) (host string, ids []int) {
	for _, u := range c.Users {
		if u.Agent != 0 && c.local(u.Agent) {
			ids = append(ids, u.Agent)
		}
	}
	slices.Sort(ids)
	return c.server(), ids
}
