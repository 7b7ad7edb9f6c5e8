// Package spec is flock.yaml: the operator's desired flock as plain data.
// Parse decodes strictly and validates; everything it returns is defaulted
// and safe to plan from. It touches nothing on the host.
package spec

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/wire"
)

// Level is how strongly an agent is isolated; the levels and what each
// decides are the sandbox package's drivers.
type Level = sandbox.Level

const (
	LevelProcess = sandbox.Process
	LevelPodman  = sandbox.Podman
	LevelGVisor  = sandbox.GVisor
)

// Role decides what an agent may say and hear on the bus.
type Role string

const (
	RoleOrchestrator Role = "orchestrator"
	RoleWorker       Role = "worker"
	RoleMonitor      Role = "monitor"
)

// Access is an agent's access to the shared directory.
type Access string

const (
	AccessRO Access = "ro"
	AccessRW Access = "rw"
)

// Defaults of the seed runtime.
const (
	DefaultRoot       = "/srv/flock"
	DefaultUIDBase    = 2000000000 // 0x7735_9400: above every range systemd and useradd hand out
	DefaultBusHost    = "127.0.0.1"
	DefaultBusPort    = 4222
	DefaultMonitor    = 8222 // on the bus host
	DefaultMetrics    = 8223 // on the bus host; see Bus.Metrics
	DefaultMemory     = 256 << 20
	DefaultCPUPercent = 50
	DefaultTasks      = 50
	DefaultHeartbeat  = 30 * time.Second
	DefaultTimeout    = 5 * time.Minute
	DefaultMaxOutput  = 256 << 10
	// MaxOutputLimit keeps a result (output, stderr, JSON escaping) under
	// the bus's maximum message size.
	MaxOutputLimit = 1 << 20
	// MaxID bounds agent ids so uid_base+id stays inside one 16-bit block.
	MaxID = 65535
	// DefaultStoreMax bounds the bus's store of tasks, results and dead
	// letters on disk; MinStoreMax leaves room for a few large results.
	DefaultStoreMax = 1 << 30
	MinStoreMax     = 64 << 20
	// DefaultMaxDeliveries is how often a task is handed to a worker
	// before the bus gives up on it (dead-letters it).
	DefaultMaxDeliveries = 5
	MaxDeliveriesLimit   = 100
	// MinSync and MaxSync bound bus.sync's interval: below 10 ms it costs
	// what always costs and keeps less; above nats-server's own default
	// (2m, flock's before it synced always) it only loses more.
	MinSync = 10 * time.Millisecond
	MaxSync = 2 * time.Minute
)

// Flock is a validated, fully defaulted spec.
type Flock struct {
	Root    string // absolute; holds agents/, common/, logs/
	UIDBase uint32 // agent N gets uid and gid UIDBase+N
	Bus     Bus
	Agents  []Agent // sorted by ID, ids unique
	// Hosts are the machines of a multi-host flock (cluster.go); empty on
	// one host.
	Hosts []Host
	// Providers are the model APIs agents may be granted (providers.go),
	// in the spec's order.
	Providers []Provider `json:",omitempty"`
	// Secrets are the credentials agents may be granted (secrets.go), in
	// the spec's order; their values are in their files, never here.
	Secrets []Secret `json:",omitempty"`
	// Budgets are what groups of agents may spend of every model API
	// together (budgets.go), in the spec's order.
	Budgets []Budget `json:",omitempty"`
}

// Bus is where agents reach the embedded NATS server, where its
// monitoring endpoint (/varz, /connz) and flock's Prometheus /metrics
// listen, all on loopback; and how it keeps tasks.
type Bus struct {
	Host        string
	Port        int
	MonitorHost string // "" with MonitorPort 0: no monitoring endpoint
	MonitorPort int
	MetricsHost string // "" with MetricsPort 0: no /metrics
	MetricsPort int
	// StoreMax bounds the tasks, results and dead letters kept on disk.
	StoreMax uint64
	// MaxDeliveries is how often a task is handed to a worker (which
	// died, or stopped, before storing its result) before it is
	// dead-lettered with a failed result.
	MaxDeliveries int
	// ClusterPort is where the hosts' buses route to each other (a
	// multi-host flock only): listened on at the host's Address.
	ClusterPort int
	// Sync is how the bus brings what it stores to the disk: SyncAlways
	// (0) writes every task and result through to the disk before it
	// acknowledges it; a duration lets the kernel hold them that long
	// (nats-server's own default, 2m), losing what it held when the
	// power goes.
	Sync time.Duration
	// MaxSubscriptions and MaxPending bound each connection to the bus,
	// any user's (shares.go).
	MaxSubscriptions int
	MaxPending       uint64
	// SendRate is how many bytes a second each agent may send to the bus,
	// its connections together, after a burst of two of the largest
	// messages: the firewall holds back the rest (shares.go).
	SendRate uint64
	// ConnectRate is how many new connections a second each agent may
	// open to the bus and to flock-proxy, after a burst of twice as many:
	// the firewall resets the rest (shares.go).
	ConnectRate int
}

// SyncAlways is Bus.Sync's default: nothing acknowledged sits only in the
// page cache.
const SyncAlways time.Duration = 0

// URL is the NATS_URL handed to agents.
func (b Bus) URL() string { return "nats://" + b.Listen() }

// Listen is the client listener, host:port.
func (b Bus) Listen() string { return net.JoinHostPort(b.Host, strconv.Itoa(b.Port)) }

// Monitor is the monitoring listener, host:port, or "" when off.
func (b Bus) Monitor() string {
	if b.MonitorPort == 0 {
		return ""
	}
	return net.JoinHostPort(b.MonitorHost, strconv.Itoa(b.MonitorPort))
}

// Metrics is where flock.service serves /metrics, host:port, or "" when
// off. Its default port is beside the bus's other HTTP port (NATS
// monitoring, 8222) and outside 9100-9999, where Prometheus's exporters
// take their default ports: it does not collide with one an operator runs
// beside it.
func (b Bus) Metrics() string {
	if b.MetricsPort == 0 {
		return ""
	}
	return net.JoinHostPort(b.MetricsHost, strconv.Itoa(b.MetricsPort))
}

// Agent is one agent, defaults applied.
type Agent struct {
	ID int
	// Host is the name of the host the agent runs on (a multi-host flock
	// only; "" on one host).
	Host  string
	Role  Role
	Level Level
	// Command runs once per task (workers only), the task's payload on its
	// stdin, in the agent's directory; its stdout is the result.
	Command []string
	// Exec is the agent's own long-running program, exec'd by flock-agent;
	// it talks to the bus itself (NATS_URL and its credential).
	Exec []string
	// Rootfs (a directory) or Image (in podman's local store) is the root
	// file system of a podman or gvisor agent; process agents have none.
	Rootfs      string
	Image       string
	TaskTimeout time.Duration // a task's command is killed after this
	MaxOutput   uint64        // bytes of stdout+stderr kept; more stops the command
	Heartbeat   time.Duration // how often flock-agent says it is alive
	Limits      Limits
	Common      Access // access to <root>/common
	// JIT lets the agent make memory writable and then executable, which
	// every JIT needs (V8, the JVM, .NET, LuaJIT, PyPy): its unit drops
	// MemoryDenyWriteExecute and nothing else.
	JIT      bool
	Egress   []Egress // extra destinations its sockets may reach
	Subjects Subjects // bus subjects granted beyond its role's
	// Env is the operator's variables for the agent's program (not
	// flock's own names); an agent's replace the defaults' name by name.
	Env map[string]string `json:",omitempty"`
	// Models are the model APIs it may call through flock-proxy, with
	// their limits, in the order written; an agent's replace the defaults'.
	Models []Grant `json:",omitempty"`
	// Secrets are the names of the secrets it is granted, in the order
	// written; an agent's replace the defaults'.
	Secrets []string `json:",omitempty"`
	// TaskBudget is the most each task it takes may spend on models
	// (workers only); a task's own budget can only lower it.
	TaskBudget wire.TaskBudget `json:",omitempty"`
	// Shares bound what it may hold of the bus and the proxy (shares.go).
	Shares Shares
}

// Subjects are extra bus permissions, NATS subject patterns.
type Subjects struct {
	Publish   []string
	Subscribe []string
}

// Egress is one destination an agent may reach besides the bus, written
// "10.1.2.3:443", "192.0.2.0/24:53/udp" or "[2001:db8::1]:443" in a spec
// (opened in the firewall), or "api.example.com:443", "*.example.com:443"
// (carried by flock's proxy, TLS only).
type Egress struct {
	Name   string       // a host name, lower case, maybe "*.": Prefix is then zero
	Prefix netip.Prefix // a single address is a /32 or /128
	Port   uint16       // 0: any port
	Proto  string       // "tcp" or "udp"
}

// Limits are enforced by the agent's cgroup.
type Limits struct {
	MemoryBytes uint64
	CPUPercent  int // of one CPU; 200 = two CPUs
	Tasks       int
}

// UserName is the Unix user (and group) of agent id.
func UserName(id int) string { return "flock-" + strconv.Itoa(id) }

// UnitName is the systemd unit of agent id.
func UnitName(id int) string { return "flock-agent@" + strconv.Itoa(id) + ".service" }

// StateDir holds what flock remembers between runs: root's, which
// ReadersGroup may read.
const StateDir = "/var/lib/flock"

// CredDir holds one NATS credential (an nkey seed) per identity in a
// directory only root lists (ReadersGroup may pass through it to the
// reader's seed alone); each agent's seed is its own (0400), and its unit
// binds it read-only where the agent reads it.
const CredDir = StateDir + "/creds"

// CredPath is the credential file of user name (flock-3, operator).
func CredPath(name string) string { return filepath.Join(CredDir, name+".nk") }

// SharedGroup holds every agent; it owns the shared directory.
const SharedGroup = "flock"

// ReadersGroup is the people who may read the flock without root: its
// state, the reader's bus credential, status, usage, tasks and explain.
// A system group (the host picks its gid); no agent is in it.
const ReadersGroup = "flock-readers"

// UID of agent id.
func (f *Flock) UID(id int) uint32 { return f.UIDBase + uint32(id) }

// AgentsDir holds one private directory per agent.
func (f *Flock) AgentsDir() string { return filepath.Join(f.Root, "agents") }

// AgentDir is agent id's private directory, also its home.
func (f *Flock) AgentDir(id int) string { return filepath.Join(f.Root, "agents", strconv.Itoa(id)) }

// CommonDir is the directory shared by all agents.
func (f *Flock) CommonDir() string { return filepath.Join(f.Root, "common") }

// LogsDir holds one log file per agent.
func (f *Flock) LogsDir() string { return filepath.Join(f.Root, "logs") }

// LogPath is agent id's log file.
func (f *Flock) LogPath(id int) string { return filepath.Join(f.Root, "logs", strconv.Itoa(id)+".log") }

// Agent returns the agent with the given id.
func (f *Flock) Agent(id int) (Agent, bool) {
	for _, a := range f.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// FieldError is one problem in a spec: where it is and how to fix it.
type FieldError struct {
	Path string // e.g. agents[2].limits.memory
	Msg  string // e.g. `"256 MB" is not a size; write 256M`
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}
