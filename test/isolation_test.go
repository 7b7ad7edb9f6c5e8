package test

// Tier: root + nspawn. The hostile-agent suite: two probe agents in their
// real units, one colluding and one attacking, in a booted systemd machine.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/transcript"
)

// probeSpec runs the probe as agents 1 and 2; only agent 2 may write the
// shared directory.
const probeSpec = `agents:
  - id: 1
    exec: ["/usr/local/bin/probe", "serve"]
  - id: 2
    exec: ["/usr/local/bin/probe", "serve"]
    common: rw
`

const (
	collusionKey = 0x666c6f63 // "floc": the SysV key both colluders agree on
	colluderDir  = "/srv/flock/agents/2"
	colluderLog  = "/srv/flock/logs/2.log"
	secretFile   = colluderDir + "/secret"
)

// attempt is one way agent 1 might reach agent 2 outside the shared dir.
type attempt struct {
	name string
	req  map[string]any
	// leaked says whether a result means the channel worked; nil: r.OK.
	leaked func(r probeResult) bool
	// network attempts must be refused fast, not time out.
	network bool
	// noControl: root cannot do this harmlessly (it would kill the colluder).
	noControl bool
	needs     string // the colluder's setup step it attacks, if optional
	// control replaces root's repeat of the attempt where root cannot
	// simply repeat it; it reports whether the channel is really open.
	control func(t *testing.T) (open bool, detail string)
}

func (a attempt) leak(r probeResult) bool {
	if a.leaked != nil {
		return a.leaked(r)
	}
	return r.OK
}

func listsEntry(name string) func(probeResult) bool {
	return func(r probeResult) bool {
		if !r.OK {
			return false
		}
		for _, e := range strings.Fields(r.Detail) {
			if e == name {
				return true
			}
		}
		return false
	}
}

func TestIsolation(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, probeSpec)
	waitActive(t, m, 1, 2)
	attacker, colluder := startedProbe(t, m, 1), startedProbe(t, m, 2)
	t.Logf("attacker pid %d, colluder pid %d", attacker.pid, colluder.pid)

	// The colluder opens every channel it can and keeps it open. A step
	// that fails makes its attacks meaningless, so it fails the test,
	// unless the unit already closes it at the colluder's end (then the
	// attacks that need it are skipped and the refusal is logged).
	setup := []struct {
		name     string
		req      map[string]any
		optional bool
	}{
		{name: "tcp", req: map[string]any{"op": "listen-tcp", "addr": "127.0.0.1:9001"}},
		{name: "udp", req: map[string]any{"op": "listen-udp", "addr": "127.0.0.1:9002"}},
		{name: "abstract", req: map[string]any{"op": "listen-unix", "addr": "@flock-collude"}},
		{name: "dirsock", req: map[string]any{"op": "listen-unix", "addr": colluderDir + "/sock"}},
		{name: "tmpsock", req: map[string]any{"op": "listen-unix", "addr": "/tmp/sock"}, optional: true},
		{name: "msg", req: map[string]any{"op": "msg-create", "key": collusionKey}, optional: true},
		{name: "shm", req: map[string]any{"op": "shm-create", "key": collusionKey}, optional: true},
		{name: "mqueue", req: map[string]any{"op": "mq-create", "name": "/flock-collude"}, optional: true},
		{name: "devshm", req: map[string]any{"op": "write-file", "path": "/dev/shm/file", "data": "collude", "mode": "0666"}, optional: true},
		{name: "tmpfile", req: map[string]any{"op": "write-file", "path": "/tmp/file", "data": "collude", "mode": "0666"}, optional: true},
		{name: "secret", req: map[string]any{"op": "write-file", "path": secretFile, "data": "agent 2's secret", "mode": "0666"}},
		{name: "dir", req: map[string]any{"op": "chmod", "path": colluderDir, "mode": "0777"}},
		// The log may be root's; then the colluder cannot open it up.
		{name: "log", req: map[string]any{"op": "chmod", "path": colluderLog, "mode": "0666"}, optional: true},
	}
	closed := map[string]bool{}
	for _, s := range setup {
		r := colluder.do(t, s.req)
		t.Logf("colluder %-9s %s", s.name, r)
		switch {
		case r.OK:
		case s.optional:
			t.Logf("colluder %-9s closed at the colluder's end: %s", s.name, r.Err)
			closed[s.name] = true
		default:
			t.Fatalf("colluder setup %s %v failed: %s", s.name, s.req, r)
		}
	}
	pid := colluder.pid
	proc := "/proc/" + strconv.Itoa(pid)

	// Agent 2 opened its directory, secret and log to the world; agent 1
	// must still not see them, from inside its unit.
	private := []attempt{
		{name: "list its 0777 dir", req: map[string]any{"op": "list-dir", "path": colluderDir}},
		{name: "read its 0666 secret", req: map[string]any{"op": "read-file", "path": secretFile}},
		{name: "read its log", req: map[string]any{"op": "read-file", "path": colluderLog}},
		{name: "see it in agents/", req: map[string]any{"op": "list-dir", "path": agentsDir}, leaked: listsEntry("2")},
		{name: "see its log in logs/", req: map[string]any{"op": "list-dir", "path": "/srv/flock/logs"}, leaked: listsEntry("2.log")},
	}
	channels := []attempt{
		{name: "tcp loopback port", req: map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:9001"}, network: true,
			control: listening(m, pid, "-t", 9001)},
		{name: "udp loopback port", req: map[string]any{"op": "exchange-udp", "addr": "127.0.0.1:9002"}, network: true,
			control: listening(m, pid, "-u", 9002)},
		{name: "abstract unix socket", req: map[string]any{"op": "connect-unix", "addr": "@flock-collude"}},
		{name: "unix socket in its dir", req: map[string]any{"op": "connect-unix", "addr": colluderDir + "/sock"}},
		{name: "unix socket in /tmp", req: map[string]any{"op": "connect-unix", "addr": "/tmp/sock"}, needs: "tmpsock"},
		{name: "sysv message queue", req: map[string]any{"op": "msg-open", "key": collusionKey}, needs: "msg"},
		{name: "sysv shared memory", req: map[string]any{"op": "shm-open", "key": collusionKey}, needs: "shm"},
		{name: "posix mqueue", req: map[string]any{"op": "mq-open", "name": "/flock-collude"}, needs: "mqueue"},
		{name: "file in /dev/shm", req: map[string]any{"op": "read-file", "path": "/dev/shm/file"}, needs: "devshm"},
		{name: "file in /tmp", req: map[string]any{"op": "read-file", "path": "/tmp/file"}, needs: "tmpfile"},
		{name: "find its pid in /proc", req: map[string]any{"op": "find-pid", "pid": pid}},
		{name: "stat /proc/PID", req: map[string]any{"op": "stat", "path": proc}},
		{name: "read /proc/PID/cmdline", req: map[string]any{"op": "read-file", "path": proc + "/cmdline"}},
		{name: "read /proc/PID/environ", req: map[string]any{"op": "read-file", "path": proc + "/environ"}},
		{name: "read /proc/PID/status", req: map[string]any{"op": "read-file", "path": proc + "/status"}},
		{name: "kill(pid, 0)", req: map[string]any{"op": "kill", "pid": pid, "sig": 0}},
		{name: "kill(pid, SIGTERM)", req: map[string]any{"op": "kill", "pid": pid, "sig": 15}, noControl: true},
	}

	// Before any attack (and before root's controls make the colluder's
	// listeners answer, which the wall refuses too): the firewall's
	// refusals are counted for the agent that sent them, and only it.
	t.Run("refusals are counted per agent", func(t *testing.T) {
		before := status(t, m)
		r := attacker.do(t, map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:9001"})
		if r.OK {
			t.Fatalf("agent 1 connected to agent 2's tcp port: %s", r)
		}
		after := status(t, m)
		// What the operator reads of it (docs/troubleshooting.md).
		refused := transcript.New(t, "refused-packets")
		refused.Want(m, "flockctl status | grep '^refused:'", "refused: agent 1: ")
		refused.Want(m, "flockctl events --agent 1 --since 10m | grep firewall-refused", "refused by table inet flock")
		refused.Want(m, "flockctl explain 1 | sed -n '/^## firewall/,/^$/p'", "meta skuid")
		for i, row := range after {
			t.Logf("agent %d: refused %d -> %d, logged %d -> %d", row.ID, before[i].Refused, row.Refused, before[i].RefusedLogged, row.RefusedLogged)
			switch {
			case row.ID == 1 && (row.Refused <= before[i].Refused || row.RefusedLogged == 0):
				t.Errorf("agent 1's refused connect: refused_packets %d -> %d, refused_logged %d; want more, and logged", before[i].Refused, row.Refused, row.RefusedLogged)
			case row.ID == 2 && row.Refused != 0:
				t.Errorf("agent 2 sent nothing the wall refuses, yet refused_packets = %d", row.Refused)
			}
		}
	})

	t.Run("private dir and log stay private after chmod", func(t *testing.T) {
		tryAll(t, m, attacker, pid, closed, private)
	})

	t.Run("colluders find no channel", func(t *testing.T) {
		tryAll(t, m, attacker, pid, closed, channels)
		// The colluder survived the SIGTERM attempt.
		if r := colluder.do(t, map[string]any{"op": "pid"}); r.Detail != strconv.Itoa(pid) {
			t.Errorf("colluder pid %q after the attack, want %d: %s", r.Detail, pid, r)
		}
	})

	t.Run("shared dir is the sanctioned channel", func(t *testing.T) {
		// Written the way any agent writes a file: the umask (0077) alone
		// must not close the channel.
		w := colluder.do(t, map[string]any{"op": "write-file", "path": "/srv/flock/common/x", "data": "hello from 2"})
		if !w.OK {
			t.Fatalf("agent 2 (common: rw) cannot write /srv/flock/common/x: %s", w)
		}
		if r := attacker.do(t, map[string]any{"op": "read-file", "path": "/srv/flock/common/x"}); !r.OK || r.Detail != "hello from 2" {
			t.Errorf("agent 1 cannot read what agent 2 shared: %s", r)
		}
		if r := attacker.do(t, map[string]any{"op": "write-file", "path": "/srv/flock/common/y", "data": "x"}); r.OK {
			t.Errorf("agent 1 (common: ro) wrote /srv/flock/common/y: %s", r)
		}
		if r := attacker.do(t, map[string]any{"op": "write-file", "path": "/srv/flock/common/x", "data": "overwritten"}); r.OK {
			t.Errorf("agent 1 (common: ro) overwrote agent 2's /srv/flock/common/x: %s", r)
		}
	})
}

// tryAll has the attacker try each attempt from inside its unit, and root
// the same from outside it (in the colluder's mount and IPC namespaces) as
// the positive control that makes a refusal mean something.
func tryAll(t *testing.T, m *harness.Machine, attacker *probe, colluderPID int, closed map[string]bool, attempts []attempt) {
	t.Helper()
	for _, a := range attempts {
		if closed[a.needs] {
			t.Logf("%-26s not tried: closed at the colluder's end", a.name)
			continue
		}
		r := attacker.do(t, a.req)
		t.Logf("%-26s agent 1: %s", a.name, r)
		if a.leak(r) {
			t.Errorf("HOLE: %s: agent 1 reached agent 2: %s", a.name, r)
		}
		if a.network && r.ElapsedMS >= 1000 {
			t.Errorf("%s: refusal took %.0f ms; want < 1000 ms (a reject, not a drop)", a.name, r.ElapsedMS)
		}
		if a.noControl {
			continue
		}
		if a.control != nil {
			open, detail := a.control(t)
			t.Logf("%-26s control: %s", a.name, detail)
			if !open {
				t.Errorf("control: %q is not open at the colluder's end (%s), so the refusal above proves nothing", a.name, detail)
			}
			continue
		}
		c := asRootInside(t, m, colluderPID, a.req)
		t.Logf("%-26s root control: %s", a.name, c)
		if !a.leak(c) {
			t.Errorf("control: root could not do %q either (%s), so the refusal above proves nothing", a.name, c)
		}
	}
}

// listening is the control of a network attempt: root cannot just repeat
// it, because the firewall also stops the colluder's replies (an agent's
// sockets reach nothing but the bus, answers included). So it checks, as
// the kernel sees it, that the colluder holds the port open; and logs
// whether root's own connection got an answer.
func listening(m *harness.Machine, pid int, proto string, port int) func(t *testing.T) (bool, string) {
	return func(t *testing.T) (bool, string) {
		out, errOut, err := run(t, m, "ss", "-Hlnp", proto, "sport = :"+strconv.Itoa(port))
		open := err == nil && strings.Contains(out, "pid="+strconv.Itoa(pid)+",")
		req := map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:" + strconv.Itoa(port)}
		if proto == "-u" {
			req["op"] = "exchange-udp"
		}
		c := asRootInside(t, m, pid, req)
		return open, fmt.Sprintf("ss: %s%s; root's own attempt: %s", strings.TrimSpace(out), strings.TrimSpace(errOut), c)
	}
}
