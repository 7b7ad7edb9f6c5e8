package bus

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// modelReports are the model gateway's last report of each agent: its
// whole counts, kept on disk by flock-proxy, which publishes them when
// they change and whenever it (re)connects. The bus keeps the last in
// memory for flockctl status and /metrics; a restart of the bus learns
// them again from the proxy.
type modelReports struct {
	mu   sync.Mutex
	last map[int]wire.ModelReport
}

func (m *modelReports) put(r wire.ModelReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[int]wire.ModelReport{}
	}
	if old, ok := m.last[r.Agent]; ok && old.At.After(r.At) {
		return // a late copy of an older report
	}
	m.last[r.Agent] = r
}

// of is agent id's last report (ok false: none).
func (m *modelReports) of(id int) (wire.ModelReport, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.last[id]
	return r, ok
}

// onUsage keeps a report of the proxy (only it publishes there). The
// agent is the subject's, which must be the body's; this host's agents'
// only, as with egress decisions.
func (s *Server) onUsage(m *nats.Msg) {
	id, ok := wire.AgentOf(m.Subject, wire.UsageSubjects)
	if !ok || !s.local(id) {
		return
	}
	r, err := wire.ParseModelReport(m.Data)
	if err != nil || r.Agent != id {
		s.log.Warnf("a model report on %s: %v (agent %d)", m.Subject, err, r.Agent)
		return
	}
	s.models.put(r)
}
