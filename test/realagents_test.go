package test

// The agents people run, not only flock's own: Node.js with the npm nats
// client (examples/node-agent) at every level, CPython as a command:
// worker (examples/python-agent) and as an exec agent, and a JVM. Each
// lives under the same walls; the one a JIT needs (writable-then-
// executable memory) is dropped only for agents declared jit: true, and an
// agent that dies on it is diagnosed.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/transcript"
)

// restartCount: how often an agent in a restart loop has died by the time
// a transcript reads it depends on the machine's speed.
var restartCount = transcript.R(`\(\d+ restarts`, "(<n> restarts")

const (
	examplesDir = "/opt/flock-examples" // where the spec's programs live, in the machine and in the rootfs
	nodeRootfs  = "/var/lib/flock-test/node-rootfs"
	nodeAgent   = examplesDir + "/node-agent/agent.js"
)

// realAgentsSpec: agents 2 and 6 lack the jit: they needs and must be
// diagnosed; 3 reaches api.flock.test through flock's proxy, trusting the
// test server's certificate through its env; 9 runs Node in gVisor (jit: true too: flock-agent's filter
// refuses W+X there, though the Sentry maps it itself); 11 is a
// probe that publishes heartbeats with the nats CLI; 12 is flock-agent
// alone, the baseline.
var realAgentsSpec = fmt.Sprintf(`defaults:
  heartbeat: 2s
  limits: {memory: 512M, tasks: 200}
agents:
  - id: 2
    exec: ["/usr/bin/node", %[1]q]
  - id: 3
    exec: ["/usr/bin/node", %[1]q]
    jit: true
    egress: ["api.flock.test:443"]
    env: {NODE_EXTRA_CA_CERTS: %[4]s}
  - id: 4
    command: ["/usr/bin/python3", "%[2]s/python-agent/agent.py"]
  - id: 5
    exec: ["/usr/bin/java", "%[2]s/jvm-agent/Agent.java"]
    jit: true
  - id: 6
    exec: ["/usr/bin/java", "%[2]s/jvm-agent/Agent.java"]
  - id: 7
    exec: ["/usr/bin/python3", "-c", "import os, time; open(os.environ['HOME'] + '/alive', 'w').write('py'); time.sleep(1e9)"]
  - id: 8
    level: podman
    rootfs: %[3]s
    exec: ["/usr/bin/node", %[1]q]
    jit: true
  - id: 9
    level: gvisor
    rootfs: %[3]s
    exec: ["/usr/bin/node", %[1]q]
    jit: true
  - id: 11
    role: monitor
    exec: ["/usr/local/bin/probe", "serve"]
  - id: 12
    role: monitor
`, nodeAgent, examplesDir, nodeRootfs, upstreamCA)

// TestRealAgents provisions the agents people run and checks each works
// as its users expect, or is told why not.
//
// Tier: root + nspawn, with node, npm, a JDK and python3 (harness.
// RuntimesTier), podman and runsc (the container levels) and the nats CLI.
func TestRealAgents(t *testing.T) {
	harness.RuntimesTier.Require(t)
	requireRuntimes(t)
	natsCLI := harness.BusTier.Tool(t, "nats")
	examples := stageExamples(t)
	rootfs := nodeRootfsFrom(t, examples)
	m := harness.BootWith(t, harness.Options{
		Binaries:   map[string]string{"nats": natsCLI},
		NspawnArgs: []string{"--bind-ro=" + examples + ":" + examplesDir, "--bind=" + rootfs + ":" + nodeRootfs},
	})
	// Before the agents: Node reads NODE_EXTRA_CA_CERTS (agent 3's env,
	// the test server's certificate) once, at its start.
	tlsUpstream(t, m)
	provision(t, m, realAgentsSpec)
	working := []int{3, 4, 5, 7, 8, 9, 11, 12}
	heartbeating := []int{3, 8, 9, 12}

	byID := func() map[int]agentStatus {
		rows := map[int]agentStatus{}
		for _, r := range status(t, m) {
			rows[r.ID] = r
		}
		return rows
	}
	m.Eventually(t, 90*time.Second, func() error {
		rows := byID()
		for _, id := range working {
			if rows[id].State != "active" || rows[id].Restarts > 0 {
				return fmt.Errorf("agent %d: %s, %d restarts, last %s", id, rows[id].State, rows[id].Restarts, rows[id].LastExit)
			}
		}
		for _, id := range heartbeating {
			if rows[id].LastHeartbeat == nil {
				return fmt.Errorf("no heartbeat from agent %d yet", id)
			}
		}
		return nil
	})

	t.Run("tasks round-trip through Node at every level and a Python command", func(t *testing.T) {
		for _, tc := range []struct {
			to, payload, want string
		}{
			{"3", "hello node", "HELLO NODE"},
			{"8", "hello podman", "HELLO PODMAN"},
			{"9", "hello gvisor", "HELLO GVISOR"},
			{"4", "three little words", `{"words": 3, "chars": 18, "first": "three"}`},
		} {
			if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", tc.to, tc.payload)); out != tc.want {
				t.Errorf("flockctl send --to %s %q: %q, want %q", tc.to, tc.payload, out, tc.want)
			}
		}
		// Any worker: the Node agents pull the shared consumer, the Python
		// one is run by flock-agent; whoever takes it answers.
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "any one")); out != "ANY ONE" && !strings.Contains(out, `"words": 2`) {
			t.Errorf("flockctl send to any worker: %q", out)
		}
		// A task the Node agent fails comes back failed, with its words.
		if _, stderr, err := run(t, m, "flockctl", "send", "--to", "3", "fail"); err == nil || !strings.Contains(stderr, "asked to fail") {
			t.Errorf("a failing Node task: err %v, stderr %q", err, stderr)
		}
		// Each kept its outputs under its own directory.
		for _, dir := range []string{"/srv/flock/agents/3/outputs", "/srv/flock/agents/8/outputs", "/srv/flock/agents/9/outputs", "/srv/flock/agents/4/outputs"} {
			if out := mustRun(t, m, "ls", dir); strings.TrimSpace(out) == "" {
				t.Errorf("%s is empty", dir)
			}
		}
		logs := mustRun(t, m, "cat", "/srv/flock/logs/3.log")
		if !strings.Contains(logs, `"msg":"task done"`) {
			t.Errorf("the Node agent's log file lacks its JSON lines:\n%s", logs)
		}
	})

	t.Run("the npm client under the default shares: it reconnects after a bus restart", func(t *testing.T) {
		// The bus restarts; the Node agents (the npm nats client, with
		// flock-agent's connection beside it) reconnect within their share
		// of connections and take tasks again, refused nothing.
		before := byID()
		restart := time.Now()
		mustRun(t, m, "systemctl", "restart", "flock.service")
		waitBus(t, m, restart, 3, 8, 9)
		t.Logf("the Node agents back on the bus %s after the restart began", time.Since(restart).Round(time.Millisecond))
		for _, tc := range []struct{ to, payload, want string }{{"3", "after restart", "AFTER RESTART"}, {"8", "podman again", "PODMAN AGAIN"}, {"9", "gvisor again", "GVISOR AGAIN"}} {
			if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", tc.to, tc.payload)); out != tc.want {
				t.Errorf("flockctl send --to %s after the restart: %q, want %q", tc.to, out, tc.want)
			}
		}
		after := byID()
		for _, id := range []int{3, 8, 9} {
			if n := after[id].ByKind["connections"]; n != before[id].ByKind["connections"] {
				t.Errorf("agent %d was refused connections over its share across the restart: %d -> %d", id, before[id].ByKind["connections"], n)
			}
			if after[id].Restarts != before[id].Restarts {
				t.Errorf("agent %d restarted with the bus: %d -> %d restarts", id, before[id].Restarts, after[id].Restarts)
			}
		}
	})

	t.Run("Node reaches an allowed name through flock's proxy, and no other", func(t *testing.T) {
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "3", "fetch https://api.flock.test/")
		if err != nil || strings.TrimSpace(out) != "200 hello from api.flock.test" {
			t.Errorf("Node fetching an allowed name: %v %q %q; want 200 hello from api.flock.test", err, out, stderr)
		}
		_, stderr, err = run(t, m, "flockctl", "send", "--to", "3", "fetch https://evil.flock.test/")
		if err == nil || !strings.Contains(stderr, "403") {
			t.Errorf("Node fetching a name not in its egress: err %v, stderr %q; want the proxy's 403", err, stderr)
		}
		t.Logf("a name not allowed, as the Node agent reports it: %s", strings.TrimSpace(stderr))
	})

	t.Run("the JVM and CPython run as exec agents", func(t *testing.T) {
		for _, id := range []int{5, 7} {
			p := fmt.Sprintf("/srv/flock/agents/%d/alive", id)
			m.Eventually(t, 60*time.Second, func() error { _, err := m.ReadFile(p); return err })
			b, _ := m.ReadFile(p)
			t.Logf("agent %d: %s", id, strings.TrimSpace(string(b)))
		}
	})

	t.Run("a JIT without jit: true is diagnosed, in status and in logs", func(t *testing.T) {
		var rows map[int]agentStatus
		m.Eventually(t, 60*time.Second, func() error {
			rows = byID()
			for _, id := range []int{2, 6} {
				if d := rows[id].Diagnosis; d == nil || d.Wall != "MemoryDenyWriteExecute" || rows[id].Restarts == 0 {
					return fmt.Errorf("agent %d: %d restarts, last %q, diagnosis %+v", id, rows[id].Restarts, rows[id].LastExit, d)
				}
			}
			return nil
		})
		t.Logf("node without jit: last %s; JVM without jit: last %s", rows[2].LastExit, rows[6].LastExit)
		if !strings.Contains(rows[2].LastExit, "SIGTRAP") || !strings.Contains(rows[6].LastExit, "exited 1") {
			t.Errorf("last exits: node %q, JVM %q; want SIGTRAP and exited 1 (as measured)", rows[2].LastExit, rows[6].LastExit)
		}
		// docs/troubleshooting.md shows what the operator sees of both:
		// status's diagnosis, then agent 2's events, logs and /metrics.
		loop := transcript.New(t, "restart-loop", restartCount)
		table, _ := loop.Run(m, "flockctl status | grep -A1 'keeps dying'")
		for _, want := range []string{"agent 2 keeps dying", "agent 6 keeps dying", "fix: set jit: true on agent 2"} {
			if !strings.Contains(table, want) {
				t.Errorf("flockctl status lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table, "agent 3 keeps dying") || strings.Contains(table, "agent 9 keeps dying") {
			t.Errorf("a working agent is diagnosed:\n%s", table)
		}
		wall := transcript.New(t, "wall-killed", restartCount)
		if out, _ := wall.Run(m, "flockctl logs 2 | tail -n 3"); !strings.Contains(out, "Likely wall: MemoryDenyWriteExecute") {
			t.Errorf("flockctl logs 2 does not name the wall:\n%s", harness.TailLines(out, 20))
		}
		if out, _ := wall.Run(m, "flockctl events --agent 2 --since 1h | grep -m1 wall-killed"); !strings.Contains(out, "likely MemoryDenyWriteExecute") {
			t.Errorf("flockctl events --agent 2 shows no wall-killed event:\n%s", out)
		}
		// flockctl events says the same of each death: a wall's kill.
		evs := eventsOf(t, m, "--since", "1h", "--agent", "2")
		if n := count(evs, events.WallKilled, 2, "main process killed by SIGTRAP; likely MemoryDenyWriteExecute"); n == 0 || n != count(evs, events.Restarted, 2, "") && n != count(evs, events.Restarted, 2, "")+1 {
			t.Errorf("agent 2: %d wall-killed events, want one per death:\n%s", n, texts(evs))
		}
		t.Logf("flockctl events --agent 2:\n%s", texts(evs))
		// /metrics names the wall too, read from agent 2's own unit by
		// flock.service, which has no spec: while its unit waits to
		// restart, its last exit is there. The JVM's exit 1 is no signal:
		// only its log says it met the wall, which /metrics does not read.
		expo := wall.Until(m, "curl -fsS "+metricsURL+" | grep '^flock_agent_wall_killed'", 60*time.Second, func(out string) error {
			if want := `flock_agent_wall_killed{agent="2",wall="MemoryDenyWriteExecute"} 1`; !strings.Contains(out, want) {
				return fmt.Errorf("no %q in /metrics: %s", want, out)
			}
			return nil
		})
		for _, l := range strings.Split(expo, "\n") {
			if strings.HasPrefix(l, "flock_agent_wall_killed{") && !strings.HasPrefix(l, `flock_agent_wall_killed{agent="2",`) {
				t.Errorf("/metrics says another agent was killed by a wall: %s", l)
			}
		}
	})

	t.Run("heartbeats from any client count; a flood of bad ones is logged once", func(t *testing.T) {
		p := &probe{m: m, id: 11}
		beatAfter := func(since time.Time) func() error {
			return func() error {
				if at := byID()[11].LastHeartbeat; at == nil || !at.After(since) {
					return fmt.Errorf("agent 11's last heartbeat %v, want one after %v", at, since)
				}
				return nil
			}
		}
		for _, body := range []string{`{"agent":"11"}`, ""} {
			since := time.Now()
			if r := p.do(t, map[string]any{"op": "exec", "argv": []string{"nats", "pub", "agent.11.heartbeat", body}}); !r.OK {
				t.Fatalf("nats pub %q: %s", body, r.Err)
			}
			m.Eventually(t, 10*time.Second, beatAfter(since))
		}
		warnings := func() int {
			return strings.Count(mustRun(t, m, "journalctl", "--no-pager", "-u", "flock.service"), "heartbeat whose body could not be read")
		}
		before := warnings()
		t0 := time.Now()
		if r := p.do(t, map[string]any{"op": "exec", "argv": []string{"nats", "pub", "--count", "1000", "--sleep", "0s", "agent.11.heartbeat", "not json"}}); !r.OK {
			t.Fatalf("nats pub --count 1000: %s", r.Err)
		}
		sent := time.Since(t0)
		m.Eventually(t, 10*time.Second, beatAfter(t0))
		if got := warnings() - before; got > 1 {
			t.Errorf("1000 unreadable heartbeats (sent in %v) wrote %d warnings, want at most 1", sent.Round(time.Millisecond), got)
		}
	})

	t.Run("what the jit: field costs", func(t *testing.T) {
		without, with := unitExposure(t, m, unitName(2)), unitExposure(t, m, unitName(3))
		row := func(id int) string {
			out := mustRun(t, m, "systemd-analyze", "security", "--no-pager", unitName(id))
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "MemoryDenyWriteExecute=") {
					return strings.Join(strings.Fields(l), " ")
				}
			}
			t.Fatalf("systemd-analyze security %s has no MemoryDenyWriteExecute row:\n%s", unitName(id), out)
			return ""
		}
		rowWithout, rowWith := row(2), row(3)
		t.Logf("FIGURE exposure: %.1f without jit, %.1f with jit: true; the row: %q / %q", without, with, rowWithout, rowWith)
		if !strings.HasPrefix(rowWithout, "✓") || !strings.HasPrefix(rowWith, "✗") {
			t.Errorf("MemoryDenyWriteExecute: without jit %q, with jit %q; want it kept, then dropped", rowWithout, rowWith)
		}
		if with < without || with > 2 {
			t.Errorf("exposure with jit %.1f, without %.1f: want no less, and still OK (at most 2)", with, without)
		}
	})

	t.Run("start to first heartbeat and idle RSS", func(t *testing.T) {
		for _, id := range heartbeating {
			since := time.Now()
			mustRun(t, m, "systemctl", "restart", unitName(id))
			m.Eventually(t, 60*time.Second, func() error {
				if at := byID()[id].LastHeartbeat; at == nil || !at.After(since) {
					return fmt.Errorf("agent %d: no heartbeat since the restart", id)
				}
				return nil
			})
			first := *byID()[id].LastHeartbeat
			t.Logf("FIGURE agent %d (%s): first heartbeat %d ms after systemctl restart (within the 2 s heartbeat period's polling)",
				id, describeAgent(id), first.Sub(since).Milliseconds())
		}
		rows := byID()
		for _, id := range []int{3, 4, 5, 7, 8, 9, 12} {
			t.Logf("FIGURE agent %d (%s): idle RSS %s", id, describeAgent(id), uidRSS(t, m, rows[id].UID))
		}
	})

	t.Run("each stops on SIGTERM", func(t *testing.T) {
		for _, id := range []int{3, 5, 7, 8, 9, 12} {
			stopsCleanly(t, m, id)
		}
	})
}

// stopsCleanly checks that the agent ends on SIGTERM, as systemd sends it
// (KillMode=mixed: to the main process), within its TimeoutStopSec.
func stopsCleanly(t *testing.T, m *harness.Machine, id int) {
	t.Helper()
	t0 := time.Now()
	mustRun(t, m, "systemctl", "stop", unitName(id))
	took := time.Since(t0)
	p := parseProps(mustRun(t, m, "systemctl", "show", "-p", "Result", "-p", "ExecMainCode", "-p", "ExecMainStatus", unitName(id)))
	t.Logf("FIGURE agent %d (%s): stopped in %v, result %s, main exit code %s status %s", id, describeAgent(id), took.Round(time.Millisecond), p["Result"], p["ExecMainCode"], p["ExecMainStatus"])
	if p["Result"] != "success" || took > 14*time.Second {
		t.Errorf("agent %d (%s) did not stop cleanly on SIGTERM: %v, result %s", id, describeAgent(id), took, p["Result"])
	}
}

func describeAgent(id int) string {
	return map[int]string{2: "node, no jit", 3: "node, process", 4: "flock-agent task + python3", 5: "JVM", 7: "python3 exec",
		8: "node, podman: the container's processes", 9: "node, gvisor: with gVisor's Sentry and gofer", 12: "flock-agent alone"}[id]
}

// uidRSS is the resident memory of every process of the agent's uid (as
// status reports it): at level process its unit's, in podman its
// container's, in gVisor the Sentry's and the gofer's too.
func uidRSS(t *testing.T, m *harness.Machine, uid uint32) string {
	t.Helper()
	out := mustRun(t, m, "ps", "-o", "rss=", "-u", strconv.FormatUint(uint64(uid), 10))
	kb := 0
	for _, f := range strings.Fields(out) {
		n, _ := strconv.Atoi(f)
		kb += n
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

// stageExamples is examples/ as an operator installs it: the Node agent
// with its dependencies from the npm registry (npm ci, the pinned lock
// file), the Python agent, and the tests' JVM agent, readable by agents.
func stageExamples(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "flock-examples")
	for _, c := range [][2]string{
		{harness.InRepo(t, "examples", "node-agent"), filepath.Join(dir, "node-agent")},
		{harness.InRepo(t, "examples", "python-agent"), filepath.Join(dir, "python-agent")},
		{harness.InRepo(t, "test", "testdata", "jvm-agent"), filepath.Join(dir, "jvm-agent")},
	} {
		if err := os.CopyFS(c[1], os.DirFS(c[0])); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(filepath.Join(dir, "node-agent", "node_modules")) // a developer's own
	cmd := exec.Command("npm", "ci", "--omit=dev", "--no-audit", "--no-fund")
	cmd.Dir = filepath.Join(dir, "node-agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in examples/node-agent: %v\n%s", err, out)
	}
	// Agents read it as other users: the test's temp dirs are 0700.
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// nodeRootfsFrom is a root file system for Node at the container levels:
// the host's node, the libraries it links, and the examples at the same
// path as on the host, so one spec line serves every level.
func nodeRootfsFrom(t *testing.T, examples string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "node-rootfs")
	node, err := filepath.EvalSymlinks("/usr/bin/node")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{node}
	out, err := exec.Command("ldd", node).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", node, err)
	}
	for _, m := range regexp.MustCompile(`(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1) {
		files = append(files, m[1])
	}
	for _, f := range files {
		dst := filepath.Join(root, f)
		if f == node {
			dst = filepath.Join(root, "usr/bin/node")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "proc", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(root, examplesDir), os.DirFS(examples)); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Readable by the agent; executable too, as the dynamic loader
		// must be for the kernel to run node with it.
		return os.Chmod(p, 0o755)
	}); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(root); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}
