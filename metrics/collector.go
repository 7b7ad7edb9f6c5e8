// Package metrics is flock's Prometheus endpoint: a Collector that reads
// the bus's figures and systemd's units when Prometheus scrapes, and
// nothing in between (no polling loop to keep, no stale copy to serve).
package metrics

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// Bus is where the bus's figures come from: *bus.Server in flock.service.
type Bus interface {
	Snapshot(ctx context.Context) (bus.Snapshot, error)
}

// Units is where the agents' units and flock-proxy.service come from:
// units.Observer in flock.service (the system bus, read-only), units.Fake
// in tests.
type Units interface {
	List(ctx context.Context) ([]units.Status, error)
	Usage(ctx context.Context, names []string) (map[string]units.Usage, error)
	ActiveState(ctx context.Context, name string) (string, error)
}

// Firewall is where the agents' refused packets come from: in
// flock.service, counters.Client, which asks the reader behind
// flock-counters.socket (the bus cannot read nftables itself); a fake in
// tests.
type Firewall interface {
	Refused(ctx context.Context) (map[uint32]netpolicy.Refusals, error)
}

// firewallEvery bounds how often scrapes read the firewall: each read
// starts a process (the reader), and systemd fails a socket whose
// connections come faster than its trigger limit (200 in 2 s). Scrapes
// closer together share one read; Prometheus scrapes every 15 s or so.
const firewallEvery = time.Second

// scrapeTimeout bounds one scrape's reads (Prometheus's default scrape
// timeout is 10 s).
const scrapeTimeout = 8 * time.Second

// Collector is flock's metrics, read at scrape time.
type Collector struct {
	bus   Bus
	units Units
	fw    Firewall // nil: no firewall figures
	now   func() time.Time
	logf  func(format string, args ...any)

	mu     sync.Mutex
	failed map[string]string // source -> its last error, logged once until it changes

	fwMu   sync.Mutex // one firewall read at a time
	fwLast firewallRead
}

// firewallRead is the last read of the firewall, shared by the scrapes
// of the next firewallEvery.
type firewallRead struct {
	at      time.Time
	refused map[uint32]netpolicy.Refusals
	err     error
}

// New is a Collector of b, u and fw (nil: none); logf is told why a
// source could not be read (its figures are left out of that scrape).
func New(b Bus, u Units, fw Firewall, logf func(format string, args ...any)) *Collector {
	return &Collector{bus: b, units: u, fw: fw, now: time.Now, logf: logf, failed: map[string]string{}}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("flock_"+name, help, labels, nil)
}

var (
	agentUp = desc("agent_up",
		"1 when the agent's unit is active (running), else 0.", "agent")
	agentRestarts = desc("agent_restarts_total",
		"Automatic restarts of the agent's unit since it was started (systemd's NRestarts).", "agent")
	agentLastExit = desc("agent_last_exit_status",
		"How the agent's main process last ended (systemd's ExecMainStatus): its exit status when code is exited, the signal's number when killed or dumped; absent while it runs (systemd forgets it at each start).", "agent", "code")
	agentWallKilled = desc("agent_wall_killed",
		"1 while the agent's last exit is likely a kill by one of flock's walls, named by wall (as flockctl events' wall-killed: a system call filter's SIGSYS, a JIT's SIGTRAP or SIGSEGV under MemoryDenyWriteExecute); absent otherwise.", "agent", "wall")
	agentHeartbeatAge = desc("agent_heartbeat_age_seconds",
		"Seconds since the bus received the agent's last heartbeat; absent when none came since the bus started.", "agent")
	agentTasks = desc("agent_tasks_total",
		"Results the agent stored through the bus's task desk since the bus started, by result (ok, failed).", "agent", "result")
	agentTaskCost = desc("agent_task_cost_usd_total",
		"What the tasks whose results the agent stored since the bus started spent on model requests, as flock-proxy counted them, in dollars.", "agent")
	agentTaskTokens = desc("agent_task_tokens_total",
		"Tokens (every kind) the tasks whose results the agent stored since the bus started spent on model requests, as flock-proxy counted them.", "agent")
	agentTasksOutOfBudget = desc("agent_tasks_out_of_budget_total",
		"Tasks whose results the agent stored since the bus started that ran out of their budget (a model request refused past it).", "agent")
	agentViolations = desc("agent_bus_violations_total",
		"Violations the bus counted for the agent, by kind; kept across bus restarts.", "agent", "kind")
	agentEgress = desc("agent_egress_decisions_total",
		"The egress proxy's decisions on the agent's connections since the bus started, by decision (allow, deny).", "agent", "decision")
	agentMemory = desc("agent_memory_bytes",
		"Memory the agent's cgroup uses now (systemd's MemoryCurrent); absent where systemd has no memory accounting.", "agent")
	agentMemoryPeak = desc("agent_memory_peak_bytes",
		"The most memory the agent's cgroup used (systemd's MemoryPeak, or the cgroup's memory.peak before systemd 255); absent where neither has it.", "agent")
	agentCPU = desc("agent_cpu_seconds_total",
		"CPU time the agent's cgroup used (systemd's CPUUsageNSec); absent where systemd has no CPU accounting.", "agent")
	agentConnections = desc("agent_bus_connections",
		"The agent's open connections to the bus.", "agent")
	agentsByState = desc("agents",
		"Agents by their unit's state (systemd's ActiveState; an agent with no unit loaded is inactive).", "state")
	tasksByState = desc("tasks",
		"Tasks by state: pending (queued, held by no worker), running (a worker holds it), dead (dead letters kept).", "state")
	storeBytes = desc("store_bytes",
		"Bytes the bus's store of tasks, results and dead letters takes on disk.")
	storeMaxBytes = desc("store_max_bytes",
		"The bound of the bus's store of tasks, results and dead letters (the spec's bus.store_max).")
	streamBytes = desc("stream_bytes",
		"Bytes each stream of the bus's store keeps: TASKS (tasks queued or running), RESULTS, DEAD (dead letters).", "stream")
	streamMaxBytes = desc("stream_max_bytes",
		"Each stream's share of bus.store_max: a full TASKS refuses new tasks, a full RESULTS or DEAD drops its oldest.", "stream")
	busConnections = desc("bus_connections",
		"Open client connections to the bus: agents', the operator's, the egress proxy's.")
	clusterHostUp = desc("cluster_host_up",
		"In a multi-host flock, 1 when this host's bus has a route to the named host's bus, else 0 (that host or the network between is down).", "host")
	agentRefused = desc("agent_refused_packets_total",
		"Packets of the agent's sockets the firewall (table inet flock) refused since the table was last written (a provision that changes the table starts them again).", "agent")
	agentRefusedLogged = desc("agent_refused_packets_logged_total",
		"Of the agent's refused packets, those written to the kernel log (at most 5 a minute per agent); the rest were over its log limit.", "agent")
	proxyUp = desc("proxy_up",
		"1 when flock-proxy.service (agents' egress by name, the model gateway) is active, else 0; absent when the host has no such unit (no agent needs it).")
	collectorSuccess = desc("collector_success",
		"1 when this scrape read the source (bus, systemd, firewall), else 0 and its figures are absent.", "source")
)

// unitStates are the ActiveStates flock_agents always has, 0 or not, so
// that an alert on failed agents has a series to watch.
var unitStates = []string{"active", "activating", "deactivating", "failed", "inactive", "reloading"}

// Describe sends every family's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{agentUp, agentRestarts, agentLastExit, agentWallKilled, agentHeartbeatAge, agentTasks,
		agentTaskCost, agentTaskTokens, agentTasksOutOfBudget,
		agentViolations, agentEgress, agentRefused, agentRefusedLogged, agentMemory, agentMemoryPeak, agentCPU, agentConnections,
		agentsByState, tasksByState, storeBytes, storeMaxBytes, streamBytes, streamMaxBytes, busConnections, clusterHostUp, proxyUp, collectorSuccess} {
		ch <- d
	}
	for _, d := range modelDescs {
		ch <- d
	}
}

// Collect reads the bus and systemd now and sends what they said. A
// source that fails leaves its figures out (collector_success says so)
// rather than failing the scrape: the other's figures still count.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := c.now()

	// The firewall's reader is a process of its own: asked while the bus
	// and systemd are read.
	fwDone := make(chan firewallRead, 1)
	if c.fw != nil {
		go func() { fwDone <- c.readFirewall(ctx, now) }()
	}
	snap, busErr := c.bus.Snapshot(ctx)
	c.report("bus", busErr)
	states, usage, unitsErr := c.readUnits(ctx)
	proxy := ""
	if states != nil { // systemd answered: ask it of the proxy too
		var err error
		proxy, err = c.proxyState(ctx)
		unitsErr = errors.Join(unitsErr, err)
	}
	c.report("systemd", unitsErr)
	ch <- gauge(collectorSuccess, success(busErr), "bus")
	ch <- gauge(collectorSuccess, success(unitsErr), "systemd")

	ids := agentIDs(snap, states)
	if states != nil { // List answered; Usage may have answered in part
		byState := map[string]int{}
		for _, s := range unitStates {
			byState[s] = 0
		}
		for _, id := range ids {
			st, ok := states[id]
			if !ok {
				st = "inactive"
			}
			byState[st]++
			ch <- gauge(agentUp, boolValue(st == "active"), strconv.Itoa(id))
		}
		for s, n := range byState {
			ch <- gauge(agentsByState, float64(n), s)
		}
		if proxy != "" {
			ch <- gauge(proxyUp, boolValue(proxy == "active"))
		}
		for _, id := range ids {
			u, ok := usage[id]
			if !ok {
				continue
			}
			a := strconv.Itoa(id)
			ch <- counter(agentRestarts, float64(u.Restarts), a)
			if u.LastExit.Code != "" {
				ch <- gauge(agentLastExit, float64(u.LastExit.Status), a, u.LastExit.Code)
			}
			if u.Wall != "" {
				ch <- gauge(agentWallKilled, 1, a, u.Wall)
			}
			if u.MemoryBytes != nil {
				ch <- gauge(agentMemory, float64(*u.MemoryBytes), a)
			}
			if u.MemoryPeak != nil {
				ch <- gauge(agentMemoryPeak, float64(*u.MemoryPeak), a)
			}
			if u.CPUNSec != nil {
				ch <- counter(agentCPU, float64(*u.CPUNSec)/1e9, a)
			}
		}
	}
	if busErr == nil || snap.Agents != nil {
		c.collectBus(ch, snap, now)
	}
	if c.fw != nil {
		fw := <-fwDone
		err := fw.err
		switch {
		case err != nil:
		case snap.Agents == nil && busErr != nil:
			err = errors.New("the bus did not answer, and its config says which uid is which agent's")
		case snap.UIDBase == 0:
			err = errors.New("the bus config has no uid_base (an older flockctl wrote it), so no agent is known by its uid: run flockctl provision")
		}
		c.report("firewall", err)
		ch <- gauge(collectorSuccess, success(err), "firewall")
		if err == nil {
			collectRefused(ch, ids, snap.UIDBase, fw.refused)
		}
	}
	if busErr == nil {
		ch <- gauge(tasksByState, float64(snap.TasksPending), "pending")
		ch <- gauge(tasksByState, float64(snap.TasksRunning), "running")
		ch <- gauge(tasksByState, float64(snap.TasksDead), "dead")
		ch <- gauge(storeBytes, float64(snap.StoreBytes))
		for name, st := range snap.Streams {
			ch <- gauge(streamBytes, float64(st.Bytes), name)
			ch <- gauge(streamMaxBytes, float64(st.Max), name)
		}
	}
}

// readFirewall is the firewall's counters: the last read when it is
// younger than firewallEvery, else a new one.
func (c *Collector) readFirewall(ctx context.Context, now time.Time) firewallRead {
	c.fwMu.Lock()
	defer c.fwMu.Unlock()
	if last := c.fwLast; !last.at.IsZero() && !now.Before(last.at) && now.Sub(last.at) < firewallEvery {
		return last
	}
	r, err := c.fw.Refused(ctx)
	c.fwLast = firewallRead{at: now, refused: r, err: err}
	return c.fwLast
}

// collectRefused sends each agent's refused and logged packets, 0 for an
// agent with none yet (so rate() has a series from the start). The
// firewall counts by uid: agent N is uid base+N.
func collectRefused(ch chan<- prometheus.Metric, ids []int, base uint32, refused map[uint32]netpolicy.Refusals) {
	for _, id := range ids {
		r := refused[base+uint32(id)]
		a := strconv.Itoa(id)
		ch <- counter(agentRefused, float64(r.Refused), a)
		ch <- counter(agentRefusedLogged, float64(r.Logged), a)
	}
}

// report logs a source's error when it is new, and its recovery: not
// once per scrape.
func (c *Collector) report(source string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch last := c.failed[source]; {
	case err != nil && err.Error() != last:
		c.logf("metrics: reading %s: %v (its figures are left out until it answers)", source, err)
		c.failed[source] = err.Error()
	case err == nil && last != "":
		c.logf("metrics: reading %s works again", source)
		delete(c.failed, source)
	}
}

// collectBus sends the bus's per-agent figures and its connections:
// Snapshot fills them before anything that can fail.
func (c *Collector) collectBus(ch chan<- prometheus.Metric, snap bus.Snapshot, now time.Time) {
	ch <- gauge(storeMaxBytes, float64(snap.StoreMax))
	ch <- gauge(busConnections, float64(snap.Connections))
	for host, up := range snap.Peers {
		ch <- gauge(clusterHostUp, boolValue(up), host)
	}
	var reports []wire.ModelReport
	for id, a := range snap.Agents {
		l := strconv.Itoa(id)
		if a.Models != nil {
			reports = append(reports, *a.Models)
		}
		ch <- gauge(agentConnections, float64(a.Connections), l)
		if !a.HeartbeatAt.IsZero() {
			ch <- gauge(agentHeartbeatAge, max(0, now.Sub(a.HeartbeatAt).Seconds()), l)
		}
		ch <- counter(agentTasks, float64(a.TasksOK), l, "ok")
		ch <- counter(agentTasks, float64(a.TasksFailed), l, "failed")
		ch <- counter(agentTaskCost, a.TaskSpend.Cost.Dollars(), l)
		ch <- counter(agentTaskTokens, float64(a.TaskSpend.Tokens), l)
		ch <- counter(agentTasksOutOfBudget, float64(a.TaskSpend.OutOfBudget), l)
		// Both decisions always, so rate() has a series from the start.
		ch <- counter(agentEgress, float64(a.Egress["allow"]), l, "allow")
		ch <- counter(agentEgress, float64(a.Egress["deny"]), l, "deny")
		for kind, n := range a.Violations {
			ch <- counter(agentViolations, float64(n), l, kind)
		}
		c.collectModels(ch, l, a.Models)
		collectSecrets(ch, l, a.Models)
	}
	collectBudgets(ch, reports, now)
}

// readUnits is each agent's ActiveState (nil when systemd did not list
// them) and, for every unit that is not inactive, its Usage (an inactive
// transient unit is about to be collected; reading it would load it
// again).
func (c *Collector) readUnits(ctx context.Context) (map[int]string, map[int]units.Usage, error) {
	list, err := c.units.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	states, byName := map[int]string{}, map[string]int{}
	var names []string
	for _, s := range list {
		id, ok := agentOf(s.Name)
		if !ok {
			continue
		}
		states[id] = s.ActiveState
		if s.ActiveState != "inactive" {
			byName[s.Name] = id
			names = append(names, s.Name)
		}
	}
	us, err := c.units.Usage(ctx, names)
	usage := map[int]units.Usage{}
	for name, u := range us {
		usage[byName[name]] = u
	}
	return states, usage, err
}

// proxyState is flock-proxy.service's ActiveState; "" when systemd has
// no such unit: provision installs it only while some agent's egress
// goes through it, so its absence is no fault.
func (c *Collector) proxyState(ctx context.Context) (string, error) {
	st, err := c.units.ActiveState(ctx, units.ProxyUnit)
	if errors.Is(err, units.ErrNotLoaded) {
		return "", nil
	}
	return st, err
}

// agentOf is N of flock-agent@N.service.
func agentOf(unit string) (int, bool) {
	s, ok := strings.CutPrefix(unit, units.Prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".service")
	id, err := strconv.Atoi(s)
	return id, ok && err == nil && id > 0
}

// agentIDs are the agents of the bus's config and of the units loaded,
// sorted.
func agentIDs(snap bus.Snapshot, states map[int]string) []int {
	var ids []int
	for id := range snap.Agents {
		ids = append(ids, id)
	}
	for id := range states {
		if _, ok := snap.Agents[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func success(err error) float64 { return boolValue(err == nil) }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var _ prometheus.Collector = (*Collector)(nil)
