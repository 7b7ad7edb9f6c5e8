package test

// Tier: root + nspawn. The bus as agents and operators meet it: the real
// flock.service (flockctl serve under systemd), real units with their
// credentials, the real nftables table, and agents trying to get round it.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// busSpec: agent 1 is the hostile probe, 2 a worker that upper-cases its
// task, 3 a monitor (flock-agent's own program), 4 a worker whose task can
// hang or flood its output. Heartbeats every 2 s so the test sees them without waiting 30 s.
const busSpec = `defaults:
  heartbeat: 2s
agents:
  - id: 1
    exec: ["/usr/local/bin/probe", "serve"]
  - id: 2
    command: ["/usr/bin/tr", "a-z", "A-Z"]
  - id: 3
    role: monitor
  - id: 4
    command: ["/bin/sh", "-c", "read x; case $x in hang) sleep 60;; flood) yes;; esac; echo \"done $x\""]
    task_timeout: 2s
    max_output: 1K
`

func TestBus(t *testing.T) {
	// Tier: root + nspawn (+ the nats CLI, which make deps installs).
	natsCLI := harness.BusTier.Tool(t, "nats")
	m := harness.BootWith(t, harness.Options{Binaries: map[string]string{"nats": natsCLI}})
	provision(t, m, busSpec)
	waitActive(t, m, 1, 2, 3, 4)

	t.Run("flock.service is a notify unit, enabled, not root", func(t *testing.T) {
		props := parseProps(mustRun(t, m, "systemctl", "show", "flock.service",
			"-p", "Type", "-p", "ActiveState", "-p", "UnitFileState", "-p", "DynamicUser", "-p", "MainPID"))
		if props["Type"] != "notify" || props["ActiveState"] != "active" || props["UnitFileState"] != "enabled" || props["DynamicUser"] != "yes" {
			t.Errorf("flock.service: %v", props)
		}
		uid := strings.TrimSpace(mustRun(t, m, "ps", "-o", "uid=", "-p", props["MainPID"]))
		if uid == "0" {
			t.Errorf("the bus runs as root")
		}
		e := unitExposure(t, m, "flock.service")
		if e > 2 {
			t.Errorf("systemd-analyze security flock.service: %.1f, want at most 2 (OK)", e)
		}
		t.Logf("flock.service runs as uid %s; systemd-analyze security: %.1f", uid, e)
	})

	// Agents that run flock-agent connect and heartbeat.
	busUp := waitBus(t, m, time.Time{}, 2, 3, 4)
	t.Logf("agents 2, 3, 4 connected and heartbeating by %s; flockctl status:\n%s", busUp.Format(time.RFC3339Nano), mustRun(t, m, "flockctl", "status"))

	t.Run("a task round-trips through flockctl send", func(t *testing.T) {
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "hello flock")); out != "HELLO FLOCK" {
			t.Errorf("flockctl send --to 2: %q", out)
		}
		// --to worker (the default): whichever worker takes it answers.
		want := map[int]string{2: "X", 4: "done x\n"}
		seen := map[int]bool{}
		for i := 0; i < 20 && len(seen) < 2; i++ {
			var res struct {
				TaskID string `json:"task_id"`
				Agent  int    `json:"agent"`
				OK     bool   `json:"ok"`
				Output string `json:"output"`
			}
			id := fmt.Sprintf("t-%d", i)
			out := mustRun(t, m, "flockctl", "send", "--id", id, "--output", "json", "x")
			if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.TaskID != id || want[res.Agent] != res.Output {
				t.Fatalf("flockctl send --output json: %v\n%s", err, out)
			}
			seen[res.Agent] = true
		}
		t.Logf("tasks to any worker were taken by agents %v", seen)
	})

	t.Run("a hanging task fails at its timeout, not later", func(t *testing.T) {
		start := time.Now()
		_, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "hang")
		took := time.Since(start)
		if err == nil || !strings.Contains(stderr, "timed out after 2s") {
			t.Errorf("want a failed result naming the timeout; err %v, stderr %q", err, stderr)
		}
		t.Logf("hanging task failed after %s (task_timeout 2s)", took.Round(time.Millisecond))
	})

	t.Run("a flooding task is stopped at max_output and fails", func(t *testing.T) {
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "--output", "json", "flood")
		var res struct {
			OK        bool   `json:"ok"`
			Truncated bool   `json:"truncated"`
			Output    string `json:"output"`
			Error     string `json:"error"`
		}
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || err == nil || res.OK || !res.Truncated || len(res.Output) > 1024 ||
			!strings.Contains(res.Error, "max_output") || !strings.Contains(stderr, "max_output") {
			t.Errorf("want a failed, truncated result naming max_output; err %v, stderr %q, result %s", err, stderr, out)
		}
	})

	t.Run("tasks are kept by the bus: --no-wait, a resent id, flockctl tasks", func(t *testing.T) {
		id := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "--id", "kept-1", "--no-wait", "later"))
		if id != "kept-1" {
			t.Fatalf("flockctl send --no-wait printed %q, want the task id", id)
		}
		// Sent again: not stored again, and --wait finds the first one's result.
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "2", "--id", "kept-1", "again")
		if err != nil || strings.TrimSpace(out) != "LATER" || !strings.Contains(stderr, "task kept-1 was already sent") {
			t.Errorf("resending kept-1: err %v, out %q, stderr %q", err, out, stderr)
		}
		var entries []struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			Subject string `json:"subject"`
			Agent   int    `json:"agent"`
		}
		out = mustRun(t, m, "flockctl", "tasks", "--output", "json")
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			t.Fatalf("flockctl tasks --output json: %v\n%s", err, out)
		}
		done := 0
		for _, e := range entries {
			if e.ID == "kept-1" && e.State == "done" && e.Subject == "tasks.agent.2" && e.Agent == 2 {
				done++
			}
		}
		if done != 1 {
			t.Errorf("flockctl tasks lists kept-1 done by agent 2 %d times:\n%s", done, out)
		}
		// The store is flock.service's StateDirectory, owned by its dynamic user.
		if out := mustRun(t, m, "ls", "/var/lib/private/flock-bus/jetstream/$G/streams"); !strings.Contains(out, "TASKS") || !strings.Contains(out, "RESULTS") || !strings.Contains(out, "DEAD") {
			t.Errorf("the bus's streams are not under its state directory: %q", out)
		}
		t.Logf("flockctl tasks:\n%s", mustRun(t, m, "flockctl", "tasks"))
	})

	t.Run("bad input to send names the fix and sends nothing", func(t *testing.T) {
		for argv, want := range map[string]string{
			"--to 3 x":       "agent 3 takes no tasks (role monitor)",
			"--to 9 x":       "no agent 9",
			"--to boss x":    `--to "boss": give worker`,
			"--output xml x": `--output "xml": choose text or json`,
		} {
			_, stderr, err := run(t, m, append([]string{"flockctl", "send"}, strings.Fields(argv)...)...)
			if err == nil || !strings.Contains(stderr, want) {
				t.Errorf("flockctl send %s: err %v, stderr %q, want %q", argv, err, stderr, want)
			}
		}
	})

	p := startedProbe(t, m, 1)
	t.Run("from inside an agent", func(t *testing.T) {
		type try struct {
			name    string
			req     map[string]any
			allowed bool
			want    string // in Err (refused) or Detail (allowed)
		}
		for _, tc := range []try{
			// Controls: what its role allows works, so a refusal below is
			// the server's and not a broken probe.
			{"connect with its own credential", map[string]any{"op": "nats-connect"}, true, "connected"},
			{"publish its own event", map[string]any{"op": "nats-pub", "name": "agent.1.events"}, true, "accepted"},
			{"subscribe its own inbox", map[string]any{"op": "nats-sub", "name": "_INBOX.flock-1.x"}, true, "accepted"},
			{"hand a task to a worker (orchestrators do)", map[string]any{"op": "nats-pub", "name": "tasks.agent.2"}, false, "Permissions Violation for Publish"},
			{"the nats CLI with NATS_URL and NATS_NKEY alone", map[string]any{"op": "exec", "argv": []string{"nats", "pub", "agent.1.events", "from the CLI"}}, true, "Published"},

			{"connect without a credential", map[string]any{"op": "nats-anon"}, false, "Authorization Violation"},
			{"publish as another agent", map[string]any{"op": "nats-pub", "name": "agent.2.heartbeat"}, false, "Permissions Violation for Publish"},
			{"publish a result", map[string]any{"op": "nats-pub", "name": "task.result"}, true, "accepted"}, // workers publish results
			{"subscribe to another agent's inbox", map[string]any{"op": "nats-sub", "name": "_INBOX.flock-2.>"}, false, "Permissions Violation for Subscription"},
			{"subscribe to every subject", map[string]any{"op": "nats-sub", "name": ">"}, false, "Permissions Violation for Subscription"},
			{"ask the bus to reload", map[string]any{"op": "nats-pub", "name": "flock.bus.reload"}, false, "Permissions Violation for Publish"},
			{"read its own credential where NATS_NKEY says", map[string]any{"op": "read-file", "path": "/run/flock-agent/nats"}, true, ""},
			{"read another agent's credential (the original)", map[string]any{"op": "read-file", "path": "/var/lib/flock/creds/flock-2.nk"}, false, ""},
			{"read the operator's credential", map[string]any{"op": "read-file", "path": "/var/lib/flock/creds/operator.nk"}, false, ""},
			{"connect with another agent's credential", map[string]any{"op": "nats-connect", "path": "/var/lib/flock/creds/flock-2.nk"}, false, ""},
			{"reach the bus's monitoring port", map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:8222"}, false, "connection refused"},
		} {
			r := p.do(t, tc.req)
			switch {
			case tc.allowed && !r.OK:
				t.Errorf("%s: refused (%s); the control failed, so the refusals prove nothing", tc.name, r.Err)
			case tc.allowed && !strings.Contains(r.Detail, tc.want):
				t.Errorf("%s: %q, want %q", tc.name, r.Detail, tc.want)
			case !tc.allowed && r.OK:
				t.Errorf("ESCAPE: %s worked: %s", tc.name, r.Detail)
			case !tc.allowed && !strings.Contains(r.Err, tc.want):
				t.Errorf("%s: refused with %q, want %q", tc.name, r.Err, tc.want)
			default:
				t.Logf("%-50s %s in %.1f ms", tc.name, map[bool]string{true: "allowed", false: "refused"}[tc.allowed], r.ElapsedMS)
			}
		}
		// Root's controls: the credential the agent could not read exists.
		if b, err := m.ReadFile("/var/lib/flock/creds/flock-2.nk"); err != nil || !strings.HasPrefix(string(b), "SU") {
			t.Errorf("control: root reads agent 2's seed: %v", err)
		}
	})

	t.Run("each agent's credential is in its unit alone", func(t *testing.T) {
		// The path every agent reads holds its own seed in its unit, and
		// nothing on the host; the host's mount table has no entry for it.
		for _, id := range []string{"1", "2"} {
			seed, err := m.ReadFile("/var/lib/flock/creds/flock-" + id + ".nk")
			if err != nil {
				t.Fatal(err)
			}
			pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "flock-agent@"+id+".service", "-p", "MainPID", "--value"))
			inUnit := mustRun(t, m, "nsenter", "-m", "-t", pid, "cat", "/run/flock-agent/nats")
			if inUnit != string(seed) {
				t.Errorf("agent %s's unit has %q at /run/flock-agent/nats, want its own seed", id, inUnit)
			}
		}
		if b, err := m.ReadFile("/run/flock-agent/nats"); err != nil || len(b) != 0 {
			t.Errorf("the host's /run/flock-agent/nats: %q, %v; want an empty mount point", b, err)
		}
		if mounts := mustRun(t, m, "cat", "/proc/self/mountinfo"); strings.Contains(mounts, "flock-agent") || strings.Contains(mounts, "/creds/") {
			t.Errorf("the host's mount table has an agent's credential:\n%s", mounts)
		}
	})

	t.Run("the credential is not in any agent's environment", func(t *testing.T) {
		seed, err := m.ReadFile("/var/lib/flock/creds/flock-2.nk")
		if err != nil {
			t.Fatal(err)
		}
		key := strings.TrimSpace(string(seed))
		env := mustRun(t, m, "systemctl", "show", "flock-agent@2.service", "-p", "Environment")
		pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "flock-agent@2.service", "-p", "MainPID", "--value"))
		procEnv := mustRun(t, m, "cat", "/proc/"+pid+"/environ")
		if strings.Contains(env, key) || strings.Contains(procEnv, key) {
			t.Errorf("agent 2's seed is in its environment")
		}
		if !strings.Contains(procEnv, "NATS_NKEY=/run/flock-agent/nats") {
			t.Errorf("NATS_NKEY does not point at the credential: %q", procEnv)
		}
	})

	t.Run("violations are in flock's log, by agent name", func(t *testing.T) {
		m.Eventually(t, 10*time.Second, func() error {
			out, _, err := m.Run(t.Context(), "journalctl", "-u", "flock.service", "--no-pager", "-o", "cat")
			if err != nil {
				return err
			}
			for _, want := range []string{`Publish Violation`, `Subscription Violation`} {
				if !hasLineWith(out, "flock-1", want) {
					return fmt.Errorf("no line naming flock-1 with %q in journalctl -u flock.service", want)
				}
			}
			return nil
		})
		for _, s := range status(t, m) {
			if s.ID == 1 && s.Violations < 3 {
				t.Errorf("flockctl status counts %d violations for agent 1, want at least 3", s.Violations)
			}
		}
	})

	t.Run("agents ride out a stopped bus and heartbeat again when it is back", func(t *testing.T) {
		mustRun(t, m, "systemctl", "stop", "flock.service")
		// The agents notice, and keep running: a bus outage is not a crash.
		m.Eventually(t, 30*time.Second, func() error {
			for _, id := range []string{"2", "3", "4"} {
				b, err := m.ReadFile("/srv/flock/logs/" + id + ".log")
				if err != nil {
					return err
				}
				if !strings.Contains(string(b), "bus disconnected") {
					return fmt.Errorf("agent %s has not noticed the bus is gone", id)
				}
			}
			return nil
		})
		out := mustRun(t, m, "flockctl", "status")
		if !strings.Contains(out, "note: the bus did not answer") {
			t.Errorf("flockctl status with the bus stopped does not say so:\n%s", out)
		}
		waitActive(t, m, 1, 2, 3, 4)
		restarted := time.Now()
		mustRun(t, m, "systemctl", "start", "flock.service")
		back := waitBus(t, m, restarted, 2, 3, 4)
		t.Logf("all agents back on the bus %s after it started again", back.Sub(restarted).Round(time.Millisecond))
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "after the restart")); out != "AFTER THE RESTART" {
			t.Errorf("flockctl send after the restart: %q", out)
		}
	})

	t.Run("a new agent reloads the bus: no restart, no one reconnects", func(t *testing.T) {
		busPID := func() string {
			return strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock.service"))
		}
		pid := busPID()
		before := strings.Count(mustRun(t, m, "cat", "/srv/flock/logs/2.log"), "bus disconnected")
		provision(t, m, busSpec+"  - id: 5\n")
		waitBus(t, m, time.Now(), 5)
		if after := busPID(); after != pid {
			t.Errorf("flock.service restarted (MainPID %s, was %s)", after, pid)
		}
		if after := strings.Count(mustRun(t, m, "cat", "/srv/flock/logs/2.log"), "bus disconnected"); after != before {
			t.Errorf("agent 2 was disconnected by the reload")
		}
	})

	t.Run("deprovision removes identities, credentials, the bus and the table", func(t *testing.T) {
		mustRun(t, m, "flockctl", "deprovision", "--all", "--purge")
		assertNothingLeft(t, m)
	})
}

// waitBus waits until the bus reports every agent in ids connected with a
// heartbeat newer than since, and returns when it saw that.
func waitBus(t testing.TB, m *harness.Machine, since time.Time, ids ...int) time.Time {
	t.Helper()
	m.Eventually(t, 60*time.Second, func() error {
		byID := map[int]agentStatus{}
		for _, s := range status(t, m) {
			byID[s.ID] = s
		}
		for _, id := range ids {
			s := byID[id]
			if s.Bus != "connected" || s.LastHeartbeat == nil || !s.LastHeartbeat.After(since) {
				return fmt.Errorf("agent %d: bus %q, last heartbeat %v (want after %s)", id, s.Bus, s.LastHeartbeat, since.Format(time.RFC3339Nano))
			}
		}
		return nil
	})
	return time.Now()
}

func hasLineWith(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// After a reboot, flock.service (enabled) starts the bus and re-creates
// every agent's transient unit and the firewall from the last provisioned
// state: the flock is back without an operator.
func TestBootBringsTheFlockBack(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, busSpec)
	before := waitActive(t, m, 1, 2, 3, 4)
	waitBus(t, m, time.Time{}, 2, 3, 4)
	rules := mustRun(t, m, "nft", "list", "table", "inet", "flock")

	if err := m.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	after := waitActive(t, m, 1, 2, 3, 4)
	for i := range before {
		if before[i].UID != after[i].UID || before[i].User != after[i].User {
			t.Errorf("agent %d was %s (uid %d), now %s (uid %d)", before[i].ID, before[i].User, before[i].UID, after[i].User, after[i].UID)
		}
	}
	back := waitBus(t, m, booted, 2, 3, 4)
	t.Logf("agents active and heartbeating again %s after the machine came back", back.Sub(booted).Round(time.Millisecond))
	if got := mustRun(t, m, "nft", "list", "table", "inet", "flock"); got != rules {
		t.Errorf("table inet flock after the reboot:\n%s\nbefore:\n%s", got, rules)
	}
	if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "still here")); out != "STILL HERE" {
		t.Errorf("flockctl send after the reboot: %q", out)
	}
	if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.HasPrefix(out, "nothing to do") {
		t.Errorf("provision after the reboot is not a no-op:\n%s", out)
	}
}
