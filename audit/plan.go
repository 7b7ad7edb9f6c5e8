// Package audit is `flockctl audit`: flock's own hostile suite (package
// audit/probe), run as each agent inside its real unit, each probe also
// run where its protection is absent (as root, outside every unit) so a
// refusal proves a wall and not a broken probe. The plan and the verdict
// are pure data; the host is reached through small interfaces (Host).
package audit

import (
	"path/filepath"
	"strconv"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Probe is one escape: what the agent tries, and its control, the same
// attempt as root outside every unit, which must work.
type Probe struct {
	Name     string        `json:"probe"`
	Category string        `json:"category"`
	Req      probe.Request `json:"-"` // as the agent, in its unit
	Control  probe.Request `json:"-"` // as root, outside every unit
	// Wall names the sandbox.Gap this probe meets where the level cannot
	// close it on this kernel ("" none): then it is open, and known.
	Wall string `json:"-"`
	// Optional: the target may be absent from a host (a container
	// engine's socket); a failed control then means "absent".
	Optional bool `json:"-"`
}

// reads are the ops whose success leaks only what they read: an empty
// mount point where another agent's file would be (a container's rootfs
// has one for every agent) is not its file.
var reads = map[string]bool{"read-file": true, "list-dir": true}

// Colluder is what the audit opens as root in the host's namespaces
// before the agents probe: the channels a colluding process would offer.
type Colluder struct {
	TCPPort, UDPPort int    // listening on every address
	Abstract         string // "@name"
	UnixTmp          string // a path socket in /tmp, 0777
	MsgKey, ShmKey   int    // SysV message queue and shared memory, 0666
	MQName           string // POSIX message queue, 0666
	Files            []string
}

// Target is what the plan of agent a reads of the host: its peer (another
// agent of the flock, the victim) and the peer's running process.
type Target struct {
	Peer    int // 0: a flock of one, no cross-agent probes
	PeerPID int // the peer's unit's main process; 0: not running
	// Channels are what the peer opened as a colluder, from inside its
	// own sandbox: what a's ipc and network probes aim at. nil: no peer
	// serves; they aim at root's.
	Channels *Colluder
	// Keys are the model APIs' keys to look for (models.go).
	Keys []ModelKey
	// Secrets are the granted secrets to look for (secrets.go).
	Secrets []Secret
	// Placeholders are the agent's placeholder of each secret granted to
	// it, by name, as provision draws them (units.Options.Placeholders):
	// its controls' alone, never in a request to the agent.
	Placeholders map[string]string
}

// Canaries are the peer's files the audit writes (root, owned by the
// peer, world-readable so only isolation stops a reader): one to read,
// one to move (read and link leave it in place).
func Canaries(f *spec.Flock, peer int) (read, move string) {
	d := f.AgentDir(peer)
	return filepath.Join(d, ".flock-audit-read"), filepath.Join(d, ".flock-audit-move")
}

// Scratch are the paths probes and controls may leave behind; the audit
// removes them after.
func Scratch(f *spec.Flock, a spec.Agent, t Target) []string {
	out := []string{"/etc/flock-audit-" + strconv.Itoa(a.ID), "/usr/local/flock-audit-" + strconv.Itoa(a.ID),
		filepath.Join(spec.StateDir, "flock-audit-"+strconv.Itoa(a.ID)), "/var/tmp/flock-audit-suid-" + strconv.Itoa(a.ID)}
	if t.Peer != 0 {
		out = append(out, filepath.Join(f.AgentDir(t.Peer), "flock-audit-by-"+strconv.Itoa(a.ID)),
			filepath.Join(f.AgentDir(a.ID), "flock-audit-link"), filepath.Join(f.AgentDir(a.ID), "flock-audit-cred-link"))
	}
	return out
}

// Plan is agent a's probes against its peer, the host, the kernel and the
// bus, with their controls.
func Plan(f *spec.Flock, a spec.Agent, t Target, c Colluder) []Probe {
	var ps []Probe
	add := func(cat, name string, req probe.Request) *Probe {
		ps = append(ps, Probe{Name: name, Category: cat, Req: req, Control: req})
		return &ps[len(ps)-1]
	}
	me := strconv.Itoa(a.ID)
	if t.Peer != 0 {
		b := t.Peer
		read, move := Canaries(f, b)
		peerCred := spec.CredPath(spec.UserName(b))
		add("files", "read another agent's file", probe.Request{Op: "read-file", Path: read})
		add("files", "list another agent's directory", probe.Request{Op: "list-dir", Path: f.AgentDir(b)})
		add("files", "write into another agent's directory", probe.Request{Op: "write-file", Path: filepath.Join(f.AgentDir(b), "flock-audit-by-"+me), Data: "x"})
		add("files", "rename another agent's file", probe.Request{Op: "rename", Path: move, Data: move + ".moved"})
		// Not the file rename moves: controls run concurrently.
		add("files", "hard-link another agent's file", probe.Request{Op: "hard-link", Path: read, Data: filepath.Join(f.AgentDir(a.ID), "flock-audit-link")})
		add("files", "read another agent's log", probe.Request{Op: "read-file", Path: f.LogPath(b)})
		add("files", "append to another agent's log", probe.Request{Op: "append-file", Path: f.LogPath(b)})
		add("files", "read another agent's credential", probe.Request{Op: "read-file", Path: peerCred})
		add("files", "hard-link another agent's credential", probe.Request{Op: "hard-link", Path: peerCred, Data: filepath.Join(f.AgentDir(a.ID), "flock-audit-cred-link")})
		add("bus", "connect with another agent's credential", probe.Request{Op: "nats-connect", Path: peerCred}).Control.Addr = f.Bus.URL()
		if t.PeerPID > 0 {
			add("processes", "see another agent's process in /proc", probe.Request{Op: "find-pid", PID: t.PeerPID})
			add("processes", "signal another agent's process", probe.Request{Op: "kill", PID: t.PeerPID, Sig: 0})
			add("processes", "ptrace another agent's process", probe.Request{Op: "ptrace", PID: t.PeerPID})
		}
		add("bus", "publish as another agent", probe.Request{Op: "nats-pub", Name: wire.Heartbeat(b)})
		add("bus", "subscribe to another agent's inbox", probe.Request{Op: "nats-sub", Name: wire.Inbox(b) + ".>"})
		// Past the desk: no agent stores a task itself, so none escapes
		// its share of TASKS (an orchestrator sends through the desk).
		add("bus", "store a task for another agent past the desk", probe.Request{Op: "nats-pub", Name: wire.AgentTasks(b)})
	}
	add("files", "read the operator's credential", probe.Request{Op: "read-file", Path: spec.CredPath(creds.OperatorName)})
	add("files", "list the credentials", probe.Request{Op: "list-dir", Path: spec.CredDir})
	if !a.Level.Contained() { // a container's PID 1 is its own
		add("processes", "see the host's init in /proc", probe.Request{Op: "find-pid", PID: 1})
	}

	// The colluder's channels: the peer's, opened inside its own sandbox,
	// where there is one; root's in the host's namespaces are the
	// controls (the probe works where nothing walls it) and, in a flock
	// of one, the target.
	at := c
	if t.Channels != nil {
		at = *t.Channels
	}
	channel := func(cat, name string, req, control probe.Request) *Probe {
		p := add(cat, name, req)
		p.Control = control
		return p
	}
	// pick: the peer's channel where it opened one, else root's.
	pick := func(opened bool, peer, host probe.Request) (probe.Request, string) {
		if t.Channels != nil && opened {
			return peer, "another agent's"
		}
		return host, "the host's"
	}
	req, owner := pick(at.Abstract != "", probe.Request{Op: "connect-unix", Addr: at.Abstract}, probe.Request{Op: "connect-unix", Addr: c.Abstract})
	channel("ipc", "connect to "+owner+" abstract UNIX socket", req, probe.Request{Op: "connect-unix", Addr: c.Abstract}).Wall = "abstract UNIX sockets"
	req, owner = pick(at.UnixTmp != "", probe.Request{Op: "connect-unix", Addr: at.UnixTmp}, probe.Request{Op: "connect-unix", Addr: c.UnixTmp})
	channel("ipc", "connect to a UNIX socket in "+owner+" /tmp", req, probe.Request{Op: "connect-unix", Addr: c.UnixTmp})
	req, owner = pick(at.MsgKey != 0, probe.Request{Op: "msg-open", Key: at.MsgKey}, probe.Request{Op: "msg-open", Key: c.MsgKey})
	channel("ipc", "open "+owner+" SysV message queue", req, probe.Request{Op: "msg-open", Key: c.MsgKey})
	req, owner = pick(at.ShmKey != 0, probe.Request{Op: "shm-open", Key: at.ShmKey}, probe.Request{Op: "shm-open", Key: c.ShmKey})
	channel("ipc", "open "+owner+" SysV shared memory segment", req, probe.Request{Op: "shm-open", Key: c.ShmKey})
	req, owner = pick(at.MQName != "", probe.Request{Op: "mq-open", Name: at.MQName}, probe.Request{Op: "mq-open", Name: c.MQName})
	channel("ipc", "open "+owner+" POSIX message queue", req, probe.Request{Op: "mq-open", Name: c.MQName})
	for i, p := range c.Files {
		target := ""
		if i < len(at.Files) {
			target = at.Files[i]
		}
		req, owner = pick(target != "", probe.Request{Op: "read-file", Path: target}, probe.Request{Op: "read-file", Path: p})
		channel("ipc", "read a file in "+owner+" "+filepath.Dir(p), req, probe.Request{Op: "read-file", Path: p})
	}
	eng := add("ipc", "connect to podman's socket", probe.Request{Op: "connect-unix", Addr: "/run/podman/podman.sock"})
	eng.Optional = true
	dbus := add("ipc", "connect to the system D-Bus", probe.Request{Op: "connect-unix", Addr: "/run/dbus/system_bus_socket"})
	dbus.Optional = true

	tcp := func(c Colluder, host string) probe.Request {
		return probe.Request{Op: "connect-tcp", Addr: host + ":" + strconv.Itoa(c.TCPPort)}
	}
	for _, n := range []struct{ host, where string }{{"127.0.0.1", "loopback port"}, {"127.0.0.2", "port on another loopback address"}, {"[::1]", "port on IPv6 loopback"}} {
		req, owner = pick(at.TCPPort != 0, tcp(at, n.host), tcp(c, n.host))
		channel("network", "connect to "+owner+" "+n.where, req, tcp(c, n.host)).Optional = n.host == "[::1]"
	}
	if t.Channels != nil {
		// A service of the host's own on loopback (root's port), which no
		// agent colludes in: the wall must hold against it too.
		channel("network", "connect to a host service on loopback", tcp(c, "127.0.0.1"), tcp(c, "127.0.0.1"))
	}
	udp := func(c Colluder) probe.Request {
		return probe.Request{Op: "exchange-udp", Addr: "127.0.0.1:" + strconv.Itoa(c.UDPPort)}
	}
	req, owner = pick(at.UDPPort != 0, udp(at), udp(c))
	channel("network", "exchange UDP with "+owner+" loopback port", req, udp(c))
	add("network", "open a raw socket", probe.Request{Op: "raw-socket"})
	add("network", "open a packet socket", probe.Request{Op: "packet-socket"})
	add("network", "open a netlink route socket", probe.Request{Op: "netlink-route"})

	op := spec.CredPath(creds.OperatorName)
	anon := add("bus", "connect without a credential", probe.Request{Op: "nats-anon"})
	anon.Control = probe.Request{Op: "nats-connect", Addr: f.Bus.URL(), Path: op}
	add("bus", "subscribe to every subject", probe.Request{Op: "nats-sub", Name: ">"})
	add("bus", "subscribe to the bus's own subjects", probe.Request{Op: "nats-sub", Name: "flock.bus.>"})
	add("bus", "publish to the JetStream API", probe.Request{Op: "nats-pub", Name: "$JS.API.STREAM.LIST"})
	if a.Role != spec.RoleWorker {
		add("bus", "publish a forged task result", probe.Request{Op: "nats-pub", Name: wire.ResultSubject})
	}
	if a.Role != spec.RoleMonitor {
		add("bus", "hear every agent's heartbeat", probe.Request{Op: "nats-sub", Name: wire.AllHeartbeats})
	}
	for i := range ps { // the controls of the bus probes speak as the operator
		if ps[i].Category == "bus" && ps[i].Control.Path == "" {
			ps[i].Control.Addr, ps[i].Control.Path = f.Bus.URL(), op
		}
	}

	add("host", "write /etc", probe.Request{Op: "write-file", Path: "/etc/flock-audit-" + me, Data: "x"})
	add("host", "write /usr/local", probe.Request{Op: "write-file", Path: "/usr/local/flock-audit-" + me, Data: "x"})
	add("host", "write flock's state directory", probe.Request{Op: "write-file", Path: filepath.Join(spec.StateDir, "flock-audit-"+me), Data: "x"})
	suid := add("host", "set a setuid bit", probe.Request{Op: "setuid-bit", Path: filepath.Join(f.AgentDir(a.ID), "flock-audit-suid")})
	suid.Control.Path = "/var/tmp/flock-audit-suid-" + me
	ps = append(ps, modelProbes(f, a, t.Keys)...)
	ps = append(ps, secretProbes(f, a, t)...)
	ps = append(ps, gatewayProbes(f, a)...)
	if !a.JIT {
		add("kernel", "map memory writable and executable", probe.Request{Op: "mmap-rwx"})
	}
	if !a.Level.Profile().OwnKernel { // its runtime's kernel emulates user namespaces; no host kernel call
		add("kernel", "create a user namespace", probe.Request{Op: "userns"})
	}
	for _, k := range []struct{ op, name string }{
		{"mount", "mount a file system"}, {"clock", "set the clock"},
		{"hostname", "set the host name"}, {"module", "load a kernel module"}, {"bpf", "load a BPF program"},
		{"perf", "open a perf event"}, {"io-uring", "set up an io_uring"},
	} {
		// Optional: a host may forbid it to root too (a container such
		// as systemd-nspawn drops CAP_SYS_TIME and CAP_SYS_MODULE).
		add("kernel", k.name, probe.Request{Op: k.op}).Optional = true
	}
	return append(ps, sharesProbes(f, a)...)
}

// Requests are the agent's side of ps, for one batch.
func Requests(ps []Probe) []probe.Request {
	out := make([]probe.Request, len(ps))
	for i, p := range ps {
		out[i] = p.Req
	}
	return out
}

// Controls are the root side of ps.
func Controls(ps []Probe) []probe.Request {
	out := make([]probe.Request, len(ps))
	for i, p := range ps {
		out[i] = p.Control
	}
	return out
}
