package test

// Tier: root + nspawn (+ podman, crun, runsc and busybox-static, which
// make deps installs). The isolation suite of level process, run unchanged
// against every level: a probe agent and a worker per level, in one flock,
// each trying the same escapes from inside its unit (and its container).

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// level is one isolation level under test: its probe agent and worker.
type level struct {
	name          string
	probe, worker int
}

var levels = []level{{"process", 1, 2}, {"podman", 3, 4}, {"gvisor", 5, 6}}

// levelsSpec gives each level a probe (its own program) and a worker
// whose command runs inside the same kind of sandbox; containers run on
// the harness's busybox rootfs.
func levelsSpec() string {
	var b strings.Builder
	b.WriteString("defaults:\n  heartbeat: 2s\nagents:\n")
	for _, l := range levels {
		root := ""
		if l.name != "process" {
			root = fmt.Sprintf("    level: %s\n    rootfs: %s\n", l.name, harness.Rootfs)
		}
		fmt.Fprintf(&b, "  - id: %d\n%s    exec: [\"/usr/local/bin/probe\", \"serve\"]\n", l.probe, root)
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
	status := mustRun(t, m, "flockctl", "status")
	t.Logf("flockctl status:\n%s", status)
	explain := mustRun(t, m, "flockctl", "explain", "-f", specPath)
	for _, label := range []string{"process isolation with guardrails", "sandboxed (podman)", "sandboxed (gVisor)"} {
		if !strings.Contains(status, label) || !strings.Contains(explain, label) {
			t.Errorf("flockctl status or explain does not say %q", label)
		}
	}
	// A secret in every agent's directory that only that agent may read,
	// written world-readable so only the isolation stops the others.
	for _, id := range ids {
		m.WriteFile(fmt.Sprintf("%s/%d/secret", agentsDir, id), []byte("secret of "+strconv.Itoa(id)), 0o644)
	}
	m.WriteFile("/srv/flock/common/shared", []byte("for everyone"), 0o640)
	mustRun(t, m, "chgrp", "flock", "/srv/flock/common/shared")
	for _, l := range levels {
		t.Run(l.name, func(t *testing.T) { levelSuite(t, m, l) })
	}

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
		for _, r := range statusRows(t, mustRun(t, m, "flockctl", "status", "--output", "json")) {
			if r.ID == 2 && (r.State != "active" || r.Level != "gvisor" || r.Label != "sandboxed (gVisor)") {
				t.Errorf("flockctl status of agent 2 after the change: %+v", r)
			}
		}
	})
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
