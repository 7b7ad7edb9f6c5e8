package test

// Tier: root + nspawn (+ podman, crun, runsc and busybox-static, which
// make deps installs). The isolation suite of level process, run unchanged
// against every level: a probe agent and a worker per level, in one flock,
// each trying the same escapes from inside its unit (and its container).

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/test/harness"
)

// level is one isolation level under test: its probe agent and worker.
type level struct {
	name          string
	probe, worker int
}

var levels = []level{{"process", 1, 2}, {"podman", 3, 4}, {"gvisor", 5, 6}}

// levelsSpec gives each level a probe (its own program, allowed one name
// through the proxy) and a worker whose command runs inside the same kind
// of sandbox; containers run on the harness's busybox rootfs.
func levelsSpec() string {
	var b strings.Builder
	b.WriteString("defaults:\n  heartbeat: 2s\nagents:\n")
	for _, l := range levels {
		root := ""
		if l.name != "process" {
			root = fmt.Sprintf("    level: %s\n    rootfs: %s\n", l.name, harness.Rootfs)
		}
		fmt.Fprintf(&b, "  - id: %d\n%s    exec: [\"/usr/local/bin/probe\", \"serve\"]\n    egress: [\"api.flock.test:443\"]\n", l.probe, root)
		fmt.Fprintf(&b, "  - id: %d\n%s    command: [\"/bin/sh\", \"-c\", \"tr a-z A-Z\"]\n", l.worker, root)
	}
	return b.String()
}

func requireRuntimes(t testing.TB) {
	t.Helper()
	harness.LevelsTier.Require(t)
}

func TestLevels(t *testing.T) {
	// Tier: root + nspawn, podman and runsc.
	requireRuntimes(t)
	m := harness.Boot(t)
	provision(t, m, levelsSpec())
	ids := []int{}
	for _, l := range levels {
		ids = append(ids, l.probe, l.worker)
	}
	waitActive(t, m, ids...)
	waitBus(t, m, time.Time{}, 2, 4, 6)
	status := statusOut(t, m)
	t.Logf("flockctl status:\n%s", status)
	spec := mustRun(t, m, "flockctl", "explain", "-f", specPath)
	for _, label := range []string{"process isolation with guardrails", "sandboxed (podman)", "sandboxed (gVisor)"} {
		if !strings.Contains(status, label) || !strings.Contains(spec, label) {
			t.Errorf("flockctl status or explain does not say %q", label)
		}
	}
	// explain ID at every level: the live unit is as planned (a contained
	// level's properties too), systemd rates it.
	t0 := time.Now()
	for _, l := range levels {
		var r explain.Report
		out := mustRun(t, m, "flockctl", "explain", strconv.Itoa(l.probe), "--output", "json")
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("explain %d: %v\n%s", l.probe, err, out)
		}
		if r.Level != l.name || len(r.Drift) != 0 || len(r.Unread) != 0 || r.Exposure.Score == nil {
			t.Errorf("explain %d (level %s): level %s, drift %+v, unread %v, exposure %+v", l.probe, l.name, r.Level, r.Drift, r.Unread, r.Exposure)
		}
		if r.Exposure.Score != nil {
			t.Logf("explain %d: level %s, exposure %.1f %s, %d rules, %d properties", l.probe, r.Level, *r.Exposure.Score, r.Exposure.Rating, len(r.Firewall), len(r.Unit.Properties))
		}
	}
	t.Logf("explain at three levels took %v", time.Since(t0).Round(time.Millisecond))
	// A secret in every agent's directory that only that agent may read,
	// written world-readable so only the isolation stops the others.
	for _, id := range ids {
		m.WriteFile(fmt.Sprintf("%s/%d/secret", agentsDir, id), []byte("secret of "+strconv.Itoa(id)), 0o644)
	}
	m.WriteFile("/srv/flock/common/shared", []byte("for everyone"), 0o640)
	mustRun(t, m, "chgrp", "flock", "/srv/flock/common/shared")
	t.Run("the wall probes work where no wall is (root, outside every unit)", func(t *testing.T) {
		for name, req := range wallProbes {
			if r := rootAttempt(t, m, req); !r.OK {
				t.Errorf("%s as root on the machine: %s; the refusals inside the agents would prove nothing", name, r)
			}
		}
	})
	for _, l := range levels {
		t.Run(l.name, func(t *testing.T) { levelSuite(t, m, l) })
	}
	t.Run("egress by name: the same proxy knows each level's agent by its uid", func(t *testing.T) {
		egressByName(t, m)
	})
	t.Run("abstract sockets: closed, or explain names the gap", func(t *testing.T) {
		abstractSockets(t, m, spec)
	})

	t.Run("flockctl audit: clean at every level, weakenings caught", func(t *testing.T) {
		auditLevels(t, m)
	})

	t.Run("changing a level restarts that agent alone", func(t *testing.T) {
		before := invocations(t, m, ids)
		provision(t, m, strings.Replace(levelsSpec(), "  - id: 2\n", "  - id: 2\n    level: gvisor\n    rootfs: "+harness.Rootfs+"\n", 1))
		waitActive(t, m, ids...)
		after := invocations(t, m, ids)
		for _, id := range ids {
			if changed := before[id] != after[id]; changed != (id == 2) {
				t.Errorf("agent %d: invocation %s -> %s; only agent 2 should restart", id, before[id], after[id])
			}
		}
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "now in gvisor")); out != "NOW IN GVISOR" {
			t.Errorf("agent 2 after the change: %q", out)
		}
		for _, r := range statusRows(t, statusOut(t, m, "--output", "json")) {
			if r.ID == 2 && (r.State != "active" || r.Level != "gvisor" || r.Label != "sandboxed (gVisor)") {
				t.Errorf("flockctl status of agent 2 after the change: %+v", r)
			}
		}
	})
}

// abstractSockets: the process-level probe listens on an abstract socket
// (the host's namespace); each level's probe tries to connect to it. It
// must be refused unless the level's driver names the gap on this kernel,
// and explain must print exactly those gaps. Root on the machine, outside
// every Landlock domain, connects as the control.
func abstractSockets(t *testing.T, m *harness.Machine, explain string) {
	const name = "@flock-levels-abstract"
	if r := startedProbe(t, m, levels[0].probe).do(t, map[string]any{"op": "listen-unix", "addr": name}); !r.OK {
		t.Fatalf("listen on %s at level process: %s", name, r)
	}
	if r := rootAttempt(t, m, map[string]any{"op": "connect-unix", "addr": name}); !r.OK {
		t.Fatalf("root on the machine cannot connect to %s: %s; the refusals would prove nothing", name, r)
	}
	host := sandbox.Host{IPCScopes: agent.IPCScopesSupported()}
	for _, l := range levels[1:] {
		d, _ := sandbox.Lookup(sandbox.Level(l.name))
		gap := len(d.Gaps(host)) > 0
		r := startedProbe(t, m, l.probe).do(t, map[string]any{"op": "connect-unix", "addr": name})
		t.Logf("level %s connects to the host's %s: %s (gap named: %v)", l.name, name, r, gap)
		switch {
		case r.OK && !gap:
			t.Errorf("ESCAPE at level %s: connected to an abstract socket outside its container, and no gap is named: %s", l.name, r)
		case !r.OK && gap:
			t.Errorf("level %s: refused (%s), yet its driver names the abstract-socket gap on this kernel", l.name, r.Err)
		}
		if named := strings.Contains(explain, "# OPEN at level "+l.name+" on this host: abstract UNIX sockets"); named != gap {
			t.Errorf("flockctl explain names the gap at level %s: %v, want %v", l.name, named, gap)
		}
	}
}

// egressByName: each level's probe reaches its allowed name through the
// proxy and gets 403 for another, at once, naming its own id: the proxy
// found the agent's uid on the connection, whether it came from the
// probe itself, from inside podman or from gVisor's Sentry.
func egressByName(t *testing.T, m *harness.Machine) {
	start := time.Now()
	tlsUpstream(t, m)
	for _, l := range levels {
		p := startedProbe(t, m, l.probe)
		ok := p.do(t, map[string]any{"op": "proxy-connect", "addr": "api.flock.test:443", "name": "api.flock.test"})
		if !ok.OK || !strings.Contains(ok.Detail, "hello from api.flock.test") {
			t.Errorf("level %s: the allowed name through the proxy: %s", l.name, ok)
		}
		no := p.do(t, map[string]any{"op": "proxy-connect", "addr": "evil.flock.test:443", "name": "evil.flock.test"})
		want := fmt.Sprintf("403 Forbidden: flock proxy: agent %d: refused: CONNECT evil.flock.test:443", l.probe)
		switch {
		case no.OK:
			t.Errorf("ESCAPE at level %s: another name through the proxy: %s", l.name, no)
		case !strings.Contains(no.Err, want):
			t.Errorf("level %s: another name: %s; want %q", l.name, no, want)
		case no.ElapsedMS > 100:
			t.Errorf("level %s: 403 after %.1f ms, want under 100", l.name, no.ElapsedMS)
		}
		// The server's address, outside this host, is the proxy's to
		// reach: the agent, with a name and no address rule, gets neither
		// a tunnel to the literal nor a direct connection.
		lit := p.do(t, map[string]any{"op": "proxy-connect", "addr": "192.0.2.10:443"})
		if lit.OK || !strings.Contains(lit.Err, "an address, not a name") {
			t.Errorf("level %s: CONNECT 192.0.2.10:443: %s; want a 403 for an address", l.name, lit)
		}
		direct := p.do(t, map[string]any{"op": "connect-tcp", "addr": "192.0.2.10:443"})
		switch {
		case direct.OK:
			t.Errorf("ESCAPE at level %s: connected to 192.0.2.10:443 past the proxy: %s", l.name, direct)
		case direct.ElapsedMS > 1000:
			t.Errorf("level %s: the direct connection was refused only after %.0f ms", l.name, direct.ElapsedMS)
		}
		t.Logf("level %-7s allowed: %.1f ms %s; refused: %.1f ms; literal: %.1f ms; direct: %s", l.name, ok.ElapsedMS, ok.Detail, no.ElapsedMS, lit.ElapsedMS, direct)
	}
	t.Logf("egress by name at three levels: %.1f s", time.Since(start).Seconds())
}

// wallProbes are the escapes agent.Walls closes, as probe requests; the
// setuid probe's path is per agent in levelSuite.
var wallProbes = map[string]map[string]any{
	"netlink-route": {"op": "netlink-route"},
	"mmap-rwx":      {"op": "mmap-rwx"},
	"setuid-bit":    {"op": "setuid-bit", "path": "/var/tmp/flock-setuid-control"},
}

// rootAttempt runs a probe request as root on the machine, outside every
// unit: a control.
func rootAttempt(t *testing.T, m *harness.Machine, req map[string]any) probeResult {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, m, probeBin, "attempt", string(body))
	var r probeResult
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("root control %s: %v\n%s\n%s", body, errors.Join(err, jerr), out, errOut)
	}
	return r
}

// invocations are the units' systemd invocation ids: a restart changes one.
func invocations(t *testing.T, m *harness.Machine, ids []int) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, id := range ids {
		out[id] = strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "--value", fmt.Sprintf("flock-agent@%d", id)))
	}
	return out
}

// levelSuite is the same for every level: what the probe of level l may
// and may not do.
func levelSuite(t *testing.T, m *harness.Machine, l level) {
	p := startedProbe(t, m, l.probe)
	other := l.worker%6 + 1 // an agent of another level
	me := strconv.Itoa(l.probe)
	type try struct {
		name    string
		req     map[string]any
		allowed bool
		want    string // in Detail (allowed) or Err (refused)
		fast    bool   // a network refusal: must come at once, not by timeout
		// leaked judges a result that is not a refusal (a listing of an
		// empty mount point in a shared rootfs is not a leak); nil: r.OK.
		leaked func(probeResult) bool
	}
	tries := []try{
		// Controls.
		{"reach the bus with its own credential", map[string]any{"op": "nats-connect"}, true, "connected", false, nil},
		{"publish its own event", map[string]any{"op": "nats-pub", "name": "agent." + me + ".events"}, true, "accepted", false, nil},
		{"read its own directory", map[string]any{"op": "read-file", "path": fmt.Sprintf("%s/%d/secret", agentsDir, l.probe)}, true, "secret of " + me, false, nil},
		{"read the shared directory", map[string]any{"op": "read-file", "path": "/srv/flock/common/shared"}, true, "for everyone", false, nil},
		// Egress: nothing but the bus.
		{"reach the bus's monitoring port", map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:8222"}, false, "refused", true, nil},
		{"reach another loopback address", map[string]any{"op": "connect-tcp", "addr": "127.0.0.2:4222"}, false, "refused", true, nil},
		{"reach another loopback port", map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:22"}, false, "refused", true, nil},
		// Files.
		{"read another agent's secret", map[string]any{"op": "read-file", "path": fmt.Sprintf("%s/%d/secret", agentsDir, other)}, false, "", false, nil},
		{"list another agent's directory", map[string]any{"op": "list-dir", "path": fmt.Sprintf("%s/%d", agentsDir, other)}, false, "", false, listsEntry("secret")},
		{"read another agent's credential (the original)", map[string]any{"op": "read-file", "path": fmt.Sprintf("/var/lib/flock/creds/flock-%d.nk", other)}, false, "", false, nil},
		{"read the operator's credential", map[string]any{"op": "read-file", "path": "/var/lib/flock/creds/operator.nk"}, false, "", false, nil},
		// The bus's rules.
		{"connect without a credential", map[string]any{"op": "nats-anon"}, false, "Authorization Violation", false, nil},
		{"publish as another agent", map[string]any{"op": "nats-pub", "name": fmt.Sprintf("agent.%d.heartbeat", other)}, false, "Permissions Violation for Publish", false, nil},
		{"subscribe to every subject", map[string]any{"op": "nats-sub", "name": ">"}, false, "Permissions Violation for Subscription", false, nil},
		// The walls of level process, at every level (agent.Walls; root
		// controls in TestLevels show each op works where they are absent).
		{"open a netlink route socket", wallProbes["netlink-route"], false, "address family not supported", false, nil},
		{"set the setuid bit on its own file", map[string]any{"op": "setuid-bit", "path": fmt.Sprintf("%s/%d/suid", agentsDir, l.probe)}, false, "operation not permitted", false, nil},
		{"map memory writable and executable", wallProbes["mmap-rwx"], false, "operation not permitted", false, nil},
	}
	if l.name != "process" {
		tries = append(tries,
			try{"find a container engine socket", map[string]any{"op": "connect-unix", "addr": "/run/podman/podman.sock"}, false, "", false, nil},
			try{"write the root file system (a 1777 dir)", map[string]any{"op": "write-file", "path": "/scratch/x", "data": "x"}, false, "read-only file system", false, nil},
		)
	}
	for _, tc := range tries {
		r := p.do(t, tc.req)
		t.Logf("%-48s %s", tc.name, r)
		switch {
		case tc.allowed && !r.OK:
			t.Errorf("%s: refused (%s); the control failed, so the refusals prove nothing", tc.name, r.Err)
		case tc.allowed && !strings.Contains(r.Detail, tc.want):
			t.Errorf("%s: %q, want %q", tc.name, r.Detail, tc.want)
		case !tc.allowed && tc.leaked != nil:
			if tc.leaked(r) {
				t.Errorf("ESCAPE at level %s: %s worked: %s", l.name, tc.name, r.Detail)
			}
		case !tc.allowed && r.OK:
			t.Errorf("ESCAPE at level %s: %s worked: %s", l.name, tc.name, r.Detail)
		case !tc.allowed && !strings.Contains(r.Err, tc.want):
			t.Errorf("%s: refused with %q, want %q", tc.name, r.Err, tc.want)
		}
		if tc.fast && r.ElapsedMS >= 1000 {
			t.Errorf("%s: refusal took %.0f ms; want < 1000 ms (a reject, not a drop)", tc.name, r.ElapsedMS)
		}
	}

	t.Run("a task round-trips", func(t *testing.T) {
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", strconv.Itoa(l.worker), "hello "+l.name)); out != strings.ToUpper("hello "+l.name) {
			t.Errorf("flockctl send --to %d: %q", l.worker, out)
		}
	})

	status := p.do(t, map[string]any{"op": "exec", "argv": []string{"grep", "Cap", "/proc/self/status"}})
	uname := p.do(t, map[string]any{"op": "exec", "argv": []string{"uname", "-a"}})
	t.Logf("uname -a inside: %s", strings.TrimSpace(uname.Detail))
	if l.name != "process" {
		t.Run("no capabilities inside", func(t *testing.T) {
			for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
				if !strings.Contains(status.Detail, set+":\t0000000000000000") {
					t.Errorf("%s is not empty: %s", set, status)
				}
			}
		})
	}
	t.Run("the kernel it sees", func(t *testing.T) {
		gvisor := strings.Contains(uname.Detail, "gvisor")
		if !uname.OK || gvisor != (l.name == "gvisor") {
			t.Errorf("uname -a at level %s: %s; gVisor's kernel shows only at level gvisor", l.name, uname)
		}
		if l.name == "gvisor" {
			d := p.do(t, map[string]any{"op": "exec", "argv": []string{"dmesg"}})
			if !strings.Contains(d.Detail, "gVisor") {
				t.Errorf("dmesg inside gVisor: %s", d)
			}
		}
	})
	t.Run("the host sees the agent's uid", func(t *testing.T) {
		// Every process of the unit that is not the runtime (root) runs as
		// the agent: the probe at process and podman, gVisor's Sentry and
		// gofer at gvisor.
		uid := strconv.Itoa(2000000000 + l.probe)
		out := mustRun(t, m, "sh", "-c", fmt.Sprintf("ps -e -o uid=,comm=,cgroup= | grep -F 'flock-agent@%d.service'", l.probe))
		agentProcs := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch {
			case f[0] == uid:
				agentProcs++
			case f[0] == "0" && l.name != "process":
				// the launcher, podman, conmon, runsc: the runtime
			default:
				t.Errorf("process %q in agent %d's unit runs as uid %s, want %s", f[1], l.probe, f[0], uid)
			}
		}
		if agentProcs == 0 {
			t.Errorf("no process of agent %d's unit runs as uid %s:\n%s", l.probe, uid, out)
		}
		t.Logf("agent %d's unit:\n%s", l.probe, out)
	})
}
