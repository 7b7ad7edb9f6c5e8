package bus

import (
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/wire"
)

// Status is what the bus knows of each agent: open connections (from the
// server, mapping each authenticated nkey back to its user), the last
// heartbeat, the violations the bus counted (violations.go), and the
// tasks it holds and asks it has waiting at the task desk.
func (s *Server) Status() wire.BusStatus {
	st := wire.BusStatus{Started: s.started, Agents: map[int]wire.AgentOnBus{}}
	s.mu.Lock()
	cfg := s.cfg
	st.Config = cfg.Digest()
	st.NoQuorum = s.noQuorum
	st.Sync = s.syncing()
	st.Store = slices.Clone(s.storeProblems)
	for id, hb := range s.beats {
		a := st.Agents[id]
		a.LastHeartbeat, a.HeartbeatAt = &hb.msg, &hb.at
		st.Agents[id] = a
	}
	s.mu.Unlock()

	byKey := map[string]int{}
	for _, u := range cfg.Users {
		if u.Agent > 0 {
			byKey[u.Nkey] = u.Agent
		}
	}
	connz, err := s.ns.Connz(&server.ConnzOptions{Username: true, State: server.ConnOpen, Limit: 1 << 20})
	if err != nil {
		s.log.Errorf("listing connections for the status: %v", err)
	} else {
		for _, ci := range connz.Conns {
			if id, ok := byKey[ci.AuthorizedUser]; ok {
				a := st.Agents[id]
				a.Connections++
				st.Agents[id] = a
			}
		}
	}
	holding, waiting := s.desk.counts()
	for id, n := range holding {
		a := st.Agents[id]
		a.Holding = n
		st.Agents[id] = a
	}
	for id, n := range waiting {
		a := st.Agents[id]
		a.Waiting = n
		st.Agents[id] = a
	}
	for _, id := range byKey {
		if r, ok := s.models.of(id); ok {
			a := st.Agents[id]
			a.Models = &r
			st.Agents[id] = a
		}
		if kinds := s.ledger.of(id); len(kinds) > 0 {
			a := st.Agents[id]
			a.Violations = kinds
			for _, n := range kinds {
				a.ViolationsTotal += n
			}
			st.Agents[id] = a
		}
	}
	return st
}
