package spec

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Shares are what one agent may hold at once of the services every agent
// shares: the bus and the egress proxy. Over a share the agent is refused
// at once, with an error that names it, and the refusal is counted; no
// other agent notices. The defaults suit a real client (a NATS client
// that reconnects while the server still holds its old connection, an
// HTTP client's pool of keep-alive connections); see docs/shares.md.
type Shares struct {
	// Connections are its bus connections open at once: flock-agent's
	// own, its program's, and a reconnect overlapping each.
	Connections int
	// Tasks and TaskBytes bound what it sent into TASKS (orchestrators)
	// that waits or runs: a count and bytes as JetStream counts them.
	Tasks     int
	TaskBytes uint64
	// Tunnels are its connections to the egress proxy open at once;
	// Handshakes, those of them not yet carrying (the request read, the
	// name resolved, the upstream dialled).
	Tunnels    int
	Handshakes int
}

// Default shares.
const (
	DefaultConnections = 8
	DefaultTaskShare   = 10000
	DefaultTaskBytes   = 64 << 20
	DefaultTunnels     = 16
	DefaultHandshakes  = 8
)

// What each connection to the bus may hold, for every user alike
// (nats-server bounds them per connection): an agent's share of them is
// its connections times these.
const (
	DefaultMaxSubscriptions = 512
	// MinMaxSubscriptions leaves the bus's own connection (the same
	// bound applies to it: about twenty subscriptions) room to grow.
	MinMaxSubscriptions = 64
	// DefaultMaxPending is what the bus buffers for a reader that does not
	// keep up before it closes that connection: two of the largest
	// messages. MinMaxPending is one, and a little.
	DefaultMaxPending = 2 * MaxMessage
	MinMaxPending     = MaxMessage + 64<<10
	// MaxMessage is the largest message the bus carries: a task result
	// may hold 1 MiB of output and as much stderr, JSON-escaped.
	MaxMessage = 8 << 20
)

// What each agent may send to the bus a second (Bus.SendRate), all its
// connections together, after a burst of two of the largest messages.
// A real client sends far less (heartbeats, tasks and results of
// kilobytes); an agent that sends more (a flood of the largest messages,
// or a colluder feeding a reader that does not read) would spend the
// bus's time, which every agent shares. The firewall holds back the rest
// per uid, in the kernel, before the bus reads a byte of it.
const (
	DefaultSendRate = 16 << 20
	MinSendRate     = 1 << 20
)

// How many new connections a second each agent may open to the bus and
// to flock-proxy together (Bus.ConnectRate), after a burst of twice as
// many. A real client opens one to the bus and reconnects at most a few
// times a second (nats.go, the npm client, flock-agent), and a handful at
// once to the proxy (Claude Code); an agent that opens more is refused by
// the firewall with a reset, before the bus or the proxy spends a
// handshake, a signature check or a uid lookup on it.
const (
	DefaultConnectRate = 20
	MinConnectRate     = 2
	MaxConnectRate     = 10000
)

// The file limits of flock's two services (their units' LimitNOFILE) and
// what each keeps for itself; the agents' shares together must fit in
// the rest, so no set of agents can take the descriptors every other
// agent and the operator need. The bus keeps its own for JetStream's
// files, its listeners, its own client, the operator's, the proxy's and
// the reader's connections; the proxy for its listener, its bus
// connection and DNS.
const (
	BusFiles      = 65536
	BusOwnFiles   = 4096
	ProxyFiles    = 65536
	ProxyOwnFiles = 1024
	// FilesPerTunnel: the agent's connection and the upstream one.
	FilesPerTunnel = 2
)

// ProxyIdle is how long a tunnel may carry nothing either way before the
// proxy closes it: longer than an API call that answers only when done.
const ProxyIdle = 15 * time.Minute

func defaultShares() Shares {
	return Shares{Connections: DefaultConnections, Tasks: DefaultTaskShare, TaskBytes: DefaultTaskBytes,
		Tunnels: DefaultTunnels, Handshakes: DefaultHandshakes}
}

// shares reads an agent's shares over base, field by field.
func (w *walker) shares(n *yaml.Node, path string, base Shares) Shares {
	fs, ok := w.fields(n, path, shareKeys...)
	if !ok {
		return base
	}
	s := base
	count := func(key, what string, lo, hi int64, into *int) {
		if v, ok := fs[key]; ok {
			if x, ok := w.integer(v, join(path, key), what, lo, hi); ok {
				*into = int(x)
			}
		}
	}
	count("connections", "a number of bus connections", 1, 4096, &s.Connections)
	count("tasks", "a number of tasks", 1, 1<<24, &s.Tasks)
	count("tunnels", "a number of proxy connections", 1, 4096, &s.Tunnels)
	count("handshakes", "a number of proxy connections", 1, 4096, &s.Handshakes)
	if v, ok := fs["task_bytes"]; ok {
		s.TaskBytes = w.size(v, join(path, "task_bytes"), "64M", 64<<10)
	}
	if s.Handshakes > s.Tunnels {
		w.fail(join(path, "handshakes"), "%d is more than its %d tunnels; a handshake is a tunnel not yet carrying: give at most %d", s.Handshakes, s.Tunnels, s.Tunnels)
	}
	return s
}

// size reads a size of at least lo bytes.
func (w *walker) size(n *yaml.Node, path, example string, lo uint64) uint64 {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.fail(path, "is %s; write a size such as %s", kindName(n), example)
		return 0
	}
	v, err := ParseSize(n.Value)
	switch {
	case err != nil:
		w.fail(path, "%s", err)
	case v < lo:
		w.fail(path, "%s is too little; give at least %dK", n.Value, lo>>10)
	}
	return v
}

// shareTotals refuses a flock whose agents' shares together exceed what
// a service holds: each host's bus and proxy their file limit, every
// host's orchestrators the TASKS stream (shared by the whole cluster).
func (w *walker) shareTotals(f *Flock) {
	hosts := []string{""}
	if f.Clustered() {
		hosts = hosts[:0]
		for _, h := range f.Hosts {
			hosts = append(hosts, h.Name)
		}
	}
	for _, h := range hosts {
		where := "this host"
		if h != "" {
			where = "host " + h
		}
		conns, tunnels := newSum[int]("agents"), newSum[int]("agents")
		for _, a := range f.On(h) {
			conns.add(a.Shares.Connections)
			if a.NeedsProxy() {
				tunnels.add(a.Shares.Tunnels)
			}
		}
		if room := BusFiles - BusOwnFiles; conns.total > room {
			w.fail("agents", "their bus connections add up to %d on %s (shares.connections: %s), beyond the %d flock.service holds for agents (LimitNOFILE %d less %d of its own); lower shares.connections, or spread the agents over more hosts",
				conns.total, where, conns, room, BusFiles, BusOwnFiles)
		}
		if room := (ProxyFiles - ProxyOwnFiles) / FilesPerTunnel; tunnels.total > room {
			w.fail("agents", "the proxy connections of the agents with names in their egress or models add up to %d on %s (shares.tunnels: %s), beyond the %d flock-proxy.service holds (LimitNOFILE %d less %d of its own, %d files a tunnel); lower shares.tunnels",
				tunnels.total, where, tunnels, room, ProxyFiles, ProxyOwnFiles, FilesPerTunnel)
		}
	}
	bytes := newSum[uint64]("orchestrators")
	for _, a := range f.Agents {
		if a.Role == RoleOrchestrator {
			bytes.add(a.Shares.TaskBytes)
		}
	}
	if tasks := f.Bus.StoreMax / 2; bytes.total > tasks {
		w.fail("agents", "the orchestrators' shares.task_bytes add up to %s (%s), beyond TASKS' %s (half of bus.store_max %s): one of them could fill the store before the others sent theirs; lower shares.task_bytes, or raise bus.store_max",
			human(bytes.total), bytes, human(tasks), human(f.Bus.StoreMax))
	}
}

// sum adds up one share over agents and says how: "1000 agents × 8".
type sum[T int | uint64] struct {
	who           string
	total, lo, hi T
	n             int
}

func newSum[T int | uint64](who string) *sum[T] { return &sum[T]{who: who} }

func (s *sum[T]) add(v T) {
	if s.n == 0 || v < s.lo {
		s.lo = v
	}
	s.hi = max(s.hi, v)
	s.total += v
	s.n++
}

func (s *sum[T]) String() string {
	show := func(v T) string {
		if b, ok := any(v).(uint64); ok {
			return human(b)
		}
		return fmt.Sprint(v)
	}
	if s.lo == s.hi {
		return fmt.Sprintf("%d %s × %s", s.n, s.who, show(s.lo))
	}
	return fmt.Sprintf("%d %s, %s to %s each", s.n, s.who, show(s.lo), show(s.hi))
}

// human writes a size as a spec would: the largest whole T, G, M or K.
func human(v uint64) string {
	for _, u := range []struct {
		shift uint
		s     string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if v >= 1<<u.shift && v%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", v>>u.shift, u.s)
		}
	}
	return fmt.Sprint(v)
}
