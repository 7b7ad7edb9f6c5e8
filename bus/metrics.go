package bus

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	// Streams are TASKS's, RESULTS's and DEAD's bytes and bounds, their
	// shares of StoreMax: a full TASKS refuses new tasks, a full RESULTS
	// or DEAD drops its oldest.
	Streams map[string]StreamBytes
	// Peers are, in a multi-host flock, the other hosts by name, each
	// true when this bus has a route to that host's bus now (nats-server's
	// routes, by the server name each announced); nil on one host.
	Peers map[string]bool
	// UIDBase is the config's: agent N's packets are counted by the
	// firewall under uid UIDBase+N (0: a config without it).
	UIDBase uint32
}

// StreamBytes are a stream's bytes and its bound (MaxBytes).
type StreamBytes struct{ Bytes, Max uint64 }

// AgentCounts are one agent's figures on the bus.
type AgentCounts struct {
	HeartbeatAt time.Time // when the bus received its last heartbeat; zero: none since the bus started
	Connections int
	// TasksOK and TasksFailed count the results it stored through the
	// task desk since the bus started.
	TasksOK, TasksFailed uint64
	// TaskSpend adds up what those tasks spent, as flock-proxy counted
	// them (a result stored without its spend adds nothing).
	TaskSpend  TaskSpendTotal
	Violations map[string]uint64 // by kind; kept across bus restarts (the ledger)
	// Egress counts the egress proxy's decisions for it by decision
	// (allow, deny) since the bus started; a denial the proxy held back
	// (rate limit) counts when the next one names it.
	Egress map[string]uint64
	// Models is the model gateway's last report (nil: none since the bus
	// started).
	Models *wire.ModelReport
}

// TaskSpendTotal is what an agent's tasks spent together.
type TaskSpendTotal struct {
	Cost        wire.PicoUSD
	Tokens      uint64 // every kind
	OutOfBudget uint64 // tasks that ran out of their budget
}

// tally counts what passes the bus per agent for /metrics: results
// stored, what their tasks spent and the egress proxy's decisions. In
// memory only: a bus restart starts them again, which Prometheus reads
// as a counter reset.
type tally struct {
	mu      sync.Mutex
	results map[int][2]uint64 // ok, failed
	spent   map[int]TaskSpendTotal
	egress  map[int]map[string]uint64
}

func newTally() *tally {
	return &tally{results: map[int][2]uint64{}, spent: map[int]TaskSpendTotal{}, egress: map[int]map[string]uint64{}}
}

// result counts a result stored, and its task's spend if it has one.
func (t *tally) result(agent int, ok bool, spend *wire.TaskSpend) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.results[agent]
	if ok {
		r[0]++
	} else {
		r[1]++
	}
	t.results[agent] = r
	if spend != nil {
		s := t.spent[agent]
		s.Cost += spend.Cost
		s.Tokens += spend.Tokens.Total()
		if spend.OutOfBudget {
			s.OutOfBudget++
		}
		t.spent[agent] = s
	}
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
	id, ok := wire.AgentOf(m.Subject, wire.EgressSubjects)
	if !ok || !s.local(id) {
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
	snap := Snapshot{Agents: map[int]AgentCounts{}, StoreMax: uint64(cfg.Tasks.withDefaults().StoreMax), UIDBase: cfg.UIDBase}
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
			Egress: maps.Clone(s.tally.egress[id]), Models: on.Models}
		if on.HeartbeatAt != nil {
			a.HeartbeatAt = *on.HeartbeatAt
		}
		r := s.tally.results[id]
		a.TasksOK, a.TasksFailed = r[0], r[1]
		a.TaskSpend = s.tally.spent[id]
		snap.Agents[id] = a
		snap.TasksRunning += uint64(on.Holding)
	}
	s.tally.mu.Unlock()
	if cl := cfg.Cluster; cl != nil && len(cl.Peers) > 0 {
		snap.Peers = s.peersUp(cl.Peers)
	}

	jsz, err := s.ns.Jsz(&server.JSzOptions{})
	if err != nil {
		return snap, fmt.Errorf("reading JetStream's store: %w", err)
	}
	snap.StoreBytes = jsz.Store
	msgs := map[string]uint64{}
	snap.Streams = map[string]StreamBytes{}
	for _, name := range []string{wire.TasksStream, wire.ResultsStream, wire.DeadStream} {
		info, err := s.streamInfo(ctx, name)
		if err != nil {
			return snap, err
		}
		msgs[name] = info.State.Msgs
		snap.Streams[name] = StreamBytes{Bytes: info.State.Bytes, Max: uint64(max(0, info.Config.MaxBytes))}
	}
	if queued := msgs[wire.TasksStream]; queued > snap.TasksRunning {
		snap.TasksPending = queued - snap.TasksRunning
	}
	snap.TasksDead = msgs[wire.DeadStream]
	return snap, nil
}

// peersUp says of each peer whether a route to it is up: one of the
// server's routes (several with route pooling) announced that name.
func (s *Server) peersUp(peers []string) map[string]bool {
	up := make(map[string]bool, len(peers))
	for _, p := range peers {
		up[p] = false
	}
	rz, err := s.ns.Routez(&server.RoutezOptions{})
	if err != nil { // nats-server's Routez does not fail; were it to, no route is known
		s.log.Warnf("listing the cluster's routes for /metrics: %v", err)
		return up
	}
	for _, r := range rz.Routes {
		if _, ok := up[r.RemoteName]; ok {
			up[r.RemoteName] = true
		}
	}
	return up
}

// streamInfo is the named stream's state and config.
func (s *Server) streamInfo(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", name, err)
	}
	return st.CachedInfo(), nil
}
