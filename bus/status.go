package bus

import (
	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/bus/wire"
)

// Status is what the bus knows of each agent: open connections (from the
// server, mapping each authenticated nkey back to its user), the last
// heartbeat, and permission violations (counted from the log).
func (s *Server) Status() wire.BusStatus {
	st := wire.BusStatus{Started: s.started, Agents: map[int]wire.AgentOnBus{}}
	s.mu.Lock()
	cfg := s.cfg
	st.Config = cfg.Digest()
	for id, hb := range s.beats {
		a := st.Agents[id]
		a.LastHeartbeat, a.HeartbeatAt = &hb.msg, &hb.at
		st.Agents[id] = a
	}
	s.mu.Unlock()

	byKey, byName := map[string]int{}, map[string]int{}
	for _, u := range cfg.Users {
		if u.Agent > 0 {
			byKey[u.Nkey], byName[u.Name] = u.Agent, u.Agent
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
	for name, n := range s.log.violationsByUser() {
		if id, ok := byName[name]; ok {
			a := st.Agents[id]
			a.Violations = n
			st.Agents[id] = a
		}
	}
	return st
}
