package bus

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Snapshot is what the bus knows for /metrics, read when Prometheus
// scrapes (package metrics): nothing here is polled.
type Snapshot struct {
	Agents map[int]AgentCounts // every agent of the config in force
	// Connections are the bus's client connections (agents', the
	// operator's, the proxy's), the bus's own not counted.
	Connections int
	// TasksPending are tasks queued that no worker holds; TasksRunning
	// those a worker holds now (the task desk's count); TasksDead the dead
	// letters kept.
	TasksPending, TasksRunning, TasksDead uint64
	StoreBytes                            uint64 // JetStream's store on disk
	StoreMax                              uint64 // the spec's store_max
}

// AgentCounts are one agent's figures on the bus.
type AgentCounts struct {
	HeartbeatAt time.Time // when the bus received its last heartbeat; zero: none since the bus started
	Connections int
	// TasksOK and TasksFailed count the results it stored through the
	// task desk since the bus started.
	TasksOK, TasksFailed uint64
	Violations           map[string]uint64 // by kind; kept across bus restarts (the ledger)
	// Egress counts the egress proxy's decisions for it by decision
	// (allow, deny) since the bus started; a denial the proxy held back
	// (rate limit) counts when the next one names it.
	Egress map[string]uint64
}

// tally counts what passes the bus per agent for /metrics: results
// stored and the egress proxy's decisions. In memory only: a bus restart
// starts them again, which Prometheus reads as a counter reset.
type tally struct {
	mu      sync.Mutex
	results map[int][2]uint64 // ok, failed
	egress  map[int]map[string]uint64
}

func newTally() *tally {
	return &tally{results: map[int][2]uint64{}, egress: map[int]map[string]uint64{}}
}

func (t *tally) result(agent int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.results[agent]
	if ok {
		r[0]++
	} else {
		r[1]++
	}
	t.results[agent] = r
}

func (t *tally) decision(agent int, decision string, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.egress[agent]
	if m == nil {
		m = map[string]uint64{}
		t.egress[agent] = m
	}
	m[decision] += n
}

// onEgress counts a decision of the egress proxy (only it publishes
// there). The agent is the subject's; a body that cannot be read is the
// proxy's bug, logged, not counted.
func (s *Server) onEgress(m *nats.Msg) {
	id, err := strconv.Atoi(strings.TrimPrefix(m.Subject, strings.TrimSuffix(wire.EgressSubjects, ">")))
	if err != nil || id <= 0 || !s.local(id) {
		return // 0: a client that is not an agent; another host's agent: its bus counts it
	}
	e, err := wire.ParseEgress(m.Data)
	if err != nil {
		s.log.Warnf("an egress decision on %s: %v", m.Subject, err)
		return
	}
	n := uint64(1)
	if e.Decision == "deny" && e.Suppressed > 0 {
		n += uint64(e.Suppressed)
	}
	s.tally.decision(id, e.Decision, n)
	if kind := wire.EgressViolation(e.Reason); kind != "" && e.Decision == "deny" {
		s.ledger.addN(id, kind, n)
		s.log.agentLine(id, kind, "[WRN]", "%s (agent %d): %s violation: the egress proxy refused %d connection(s) to %s:%d over its share", spec.UserName(id), id, kind, n, e.Name, e.Port)
	}
}

// Snapshot reads the bus's figures now: its own counts, the server's
// connections and two stream infos, all in this process.
func (s *Server) Snapshot(ctx context.Context) (Snapshot, error) {
	st := s.Status()
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	snap := Snapshot{Agents: map[int]AgentCounts{}, StoreMax: uint64(cfg.Tasks.withDefaults().StoreMax)}
	if n := s.ns.NumClients() - 1; n > 0 { // the bus's own client is one
		snap.Connections = n
	}
	s.tally.mu.Lock()
	// In a cluster, this host's agents only: every host's /metrics is
	// scraped, and another host's agent would show here as down.
	_, local := localAgents(cfg)
	for _, id := range local {
		on := st.Agents[id]
		a := AgentCounts{Connections: on.Connections, Violations: on.Violations,
			Egress: maps.Clone(s.tally.egress[id])}
		if on.HeartbeatAt != nil {
			a.HeartbeatAt = *on.HeartbeatAt
		}
		r := s.tally.results[id]
		a.TasksOK, a.TasksFailed = r[0], r[1]
		snap.Agents[id] = a
		snap.TasksRunning += uint64(on.Holding)
	}
	s.tally.mu.Unlock()

	jsz, err := s.ns.Jsz(&server.JSzOptions{})
	if err != nil {
		return snap, fmt.Errorf("reading JetStream's store: %w", err)
	}
	snap.StoreBytes = jsz.Store
	queued, err := s.streamMsgs(ctx, wire.TasksStream)
	if err != nil {
		return snap, err
	}
	if queued > snap.TasksRunning {
		snap.TasksPending = queued - snap.TasksRunning
	}
	snap.TasksDead, err = s.streamMsgs(ctx, wire.DeadStream)
	return snap, err
}

// streamMsgs is how many messages the named stream keeps.
func (s *Server) streamMsgs(ctx context.Context, name string) (uint64, error) {
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", name, err)
	}
	return st.CachedInfo().State.Msgs, nil
}
