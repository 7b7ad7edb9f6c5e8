package test

// Tier: root + nspawn. flockctl events on a booted systemd machine: a bus
// violation, a firewall refusal, a restart and repaired drift, each shown
// once with its agent; -f shows a new event within a second. The OOM kill
// is in the VM tier (TestVMEnforcesLimits): nspawn does not enforce
// MemoryMax.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/test/harness"
)

// eventsSpec: agent 3 has a name in its egress, so the flock runs its
// proxy.
const eventsSpec = `agents:
  - id: 1
  - id: 2
  - id: 3
    egress: ["api.flock.test:443"]
`

const (
	followUnit = "flock-test-events.service"
	followOut  = "/root/events.follow"
)

// followed is one line of the follower: when it arrived, and the event.
type followed struct {
	at time.Time
	ev events.Event
}

func TestEvents(t *testing.T) {
	// Tier: root + nspawn (+ curl, an agent's client of the proxy).
	curl := harness.BusTier.Tool(t, "curl")
	m := harness.Boot(t)
	provision(t, m, eventsSpec)
	waitActive(t, m, 1, 2, 3)

	// The follower stamps each line with the time it arrived (bash's
	// EPOCHREALTIME: no process per line).
	mustRun(t, m, "systemd-run", "--unit", followUnit, "--property", "Type=exec", "bash", "-c",
		"flockctl events -f --since 0s --output json | while IFS= read -r l; do echo \"$EPOCHREALTIME $l\"; done > "+followOut)
	m.Eventually(t, 10*time.Second, func() error {
		_, _, err := run(t, m, "pgrep", "-f", "journalctl.*--follow")
		return err
	})
	t0 := time.Now()

	// Agent 2 publishes as agent 1 (its own credential, from outside its
	// unit: the bus knows it by its key).
	out, _, _ := run(t, m, "env", "NATS_URL=nats://127.0.0.1:4222", "NATS_NKEY=/var/lib/flock/creds/flock-2.nk",
		probeBin, "attempt", `{"op":"nats-pub","name":"agent.1.heartbeat"}`)
	if !strings.Contains(out, "Permissions Violation for Publish") {
		t.Fatalf("agent 2's publish on agent.1.heartbeat: %s", out)
	}
	// Agent 3's uid connects to the bus's monitoring port: refused.
	refusedAt := time.Now()
	out, _, _ = run(t, m, "setpriv", "--reuid=2000000003", "--regid=2000000003", "--clear-groups",
		probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:8222"}`)
	if !strings.Contains(out, "connection refused") {
		t.Fatalf("agent 3's connect to 127.0.0.1:8222: %s", out)
	}
	// Agent 3 asks the proxy for a name not in its egress: 403.
	out, _, _ = run(t, m, "setpriv", "--reuid=2000000003", "--regid=2000000003", "--clear-groups",
		curl, "-sS", "-o", "/dev/null", "-w", "%{http_connect}", "--proxy", "http://127.0.0.1:4230", "https://evil.flock.test/")
	if !strings.HasPrefix(out, "403") {
		t.Fatalf("agent 3's CONNECT evil.flock.test:443: %q, want the proxy's 403", out)
	}
	// Agent 1 is killed; systemd restarts it (RestartUSec 5 s).
	mustRun(t, m, "systemctl", "kill", "--signal=KILL", "--kill-who=main", unitName(1))
	waitActive(t, m, 1, 2, 3)
	m.Eventually(t, 30*time.Second, func() error {
		if n := unitProp(t, m, 1, "NRestarts"); n != "1" {
			return fmt.Errorf("agent 1 NRestarts=%s", n)
		}
		return nil
	})
	// Agent 2 stopped by hand is drift; provision repairs it.
	mustRun(t, m, "systemctl", "stop", unitName(2))
	provision(t, m, eventsSpec)
	waitActive(t, m, 1, 2, 3)

	want := []struct {
		kind  events.Kind
		agent int
		has   string
	}{
		{events.BusViolation, 2, `Publish Violation - Subject "agent.1.heartbeat"`},
		{events.FirewallRefused, 3, "1 packet refused by table inet flock"},
		{events.EgressDenied, 3, "CONNECT evil.flock.test:443 refused: no-rule"},
		{events.Failed, 1, "main process killed by SIGKILL"},
		{events.Restarted, 1, "restart 1"},
		{events.DriftRepaired, 2, "start unit"},
	}

	t.Run("history shows each once, with its agent", func(t *testing.T) {
		var evs []events.Event
		m.Eventually(t, 10*time.Second, func() error {
			evs = eventsOf(t, m, "--since", "10m")
			for _, w := range want {
				if n := count(evs, w.kind, w.agent, w.has); n != 1 {
					return fmt.Errorf("%d %s events of agent %d with %q, want 1:\n%s", n, w.kind, w.agent, w.has, texts(evs))
				}
			}
			return nil
		})
		for _, k := range []events.Kind{events.BusViolation, events.FirewallRefused, events.EgressDenied, events.Restarted, events.DriftRepaired} {
			if n := count(evs, k, 0, ""); n != 1 {
				t.Errorf("%d %s events in all, want 1:\n%s", n, k, texts(evs))
			}
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Time.Before(evs[i-1].Time) {
				t.Errorf("not oldest first: %v after %v", evs[i], evs[i-1])
			}
		}
		// The stop that is the first half of the restart is not a stop;
		// the stop by hand is.
		if n := count(evs, events.Stopped, 1, ""); n != 0 {
			t.Errorf("agent 1 stopped %d times, want 0 (it was restarted):\n%s", n, texts(evs))
		}
		if n := count(evs, events.Stopped, 2, ""); n != 1 {
			t.Errorf("agent 2 stopped %d times, want 1:\n%s", n, texts(evs))
		}
		text := mustRun(t, m, "flockctl", "events", "--since", "10m")
		t.Logf("flockctl events --since 10m:\n%s", text)
		t.Logf("flockctl events --since 10m --output json:\n%s", mustRun(t, m, "flockctl", "events", "--since", "10m", "--output", "json"))
		if strings.Count(text, "\n") != len(evs) {
			t.Errorf("text has %d lines, json %d events", strings.Count(text, "\n"), len(evs))
		}
		for _, e := range eventsOf(t, m, "--since", "10m", "--agent", "1") {
			if e.Agent != 1 {
				t.Errorf("--agent 1 shows %+v", e)
			}
		}
	})

	t.Run("-f shows each new event within a second", func(t *testing.T) {
		var got []followed
		m.Eventually(t, 10*time.Second, func() error {
			got = readFollowed(t, m)
			for _, w := range want {
				if n := countFollowed(got, w.kind, w.agent, w.has); n != 1 {
					return fmt.Errorf("-f: %d %s events of agent %d with %q, want 1", n, w.kind, w.agent, w.has)
				}
			}
			return nil
		})
		for _, f := range got {
			if f.ev.Time.Before(t0) {
				t.Errorf("-f --since 0s showed %+v, from before it followed", f.ev)
			}
			// Latency from the journal's receipt of it (the firewall's
			// counters have no time of their own: from the refused connect).
			from := f.ev.Time
			if f.ev.Source == "firewall-counters" {
				from = refusedAt
			}
			lat := f.at.Sub(from)
			t.Logf("FIGURE -f: %s of agent %d (%s) shown %v after it", f.ev.Kind, f.ev.Agent, f.ev.Source, lat.Round(time.Millisecond))
			if lat > time.Second {
				t.Errorf("-f showed %s of agent %d %v after it, want within a second", f.ev.Kind, f.ev.Agent, lat)
			}
		}
	})

	t.Run("bad flags are refused, naming the flag", func(t *testing.T) {
		for flag, args := range map[string][]string{
			"--since":  {"--since", "yesterday"},
			"--output": {"--output", "yaml"},
			"--agent":  {"--agent", "-1"},
		} {
			_, errOut, err := run(t, m, append([]string{"flockctl", "events"}, args...)...)
			if err == nil || !strings.Contains(errOut, flag) {
				t.Errorf("flockctl events %v: %v, stderr %q; want refused naming %s", args, err, errOut, flag)
			}
		}
	})

	if capture != "" {
		captureJournal(t, m, capture+"/nspawn.jsonl")
	}
	mustRun(t, m, "systemctl", "stop", followUnit)
	mustRun(t, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
}

// eventsOf is flockctl events --output json with args.
func eventsOf(t testing.TB, m runner, args ...string) []events.Event {
	t.Helper()
	out := mustRun(t, m, append([]string{"flockctl", "events", "--output", "json"}, args...)...)
	var evs []events.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		e, err := events.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

// count is how many of evs are of kind (and agent, if not 0) with has in
// their detail.
func count(evs []events.Event, kind events.Kind, agent int, has string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind && (agent == 0 || e.Agent == agent) && strings.Contains(e.Detail, has) {
			n++
		}
	}
	return n
}

func texts(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Text() + "\n")
	}
	return b.String()
}

func readFollowed(t testing.TB, m *harness.Machine) []followed {
	t.Helper()
	b, err := m.ReadFile(followOut)
	if err != nil {
		t.Fatal(err)
	}
	var out []followed
	for _, l := range strings.Split(string(b), "\n") {
		stamp, line, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseFloat(stamp, 64)
		if err != nil {
			t.Fatalf("follower line %q: %v", l, err)
		}
		e, err := events.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, followed{at: time.UnixMicro(int64(secs * 1e6)), ev: e})
	}
	return out
}

func countFollowed(fs []followed, kind events.Kind, agent int, has string) int {
	evs := make([]events.Event, len(fs))
	for i, f := range fs {
		evs[i] = f.ev
	}
	return count(evs, kind, agent, has)
}

// capture, if set (FLOCK_CAPTURE_JOURNAL=DIR), is where the tests write
// the raw journal entries flockctl events reads, for events/testdata.
var capture = os.Getenv("FLOCK_CAPTURE_JOURNAL")

func captureJournal(t testing.TB, m runner, path string) {
	t.Helper()
	args := []string{"journalctl", "--no-pager", "-o", "json", "--since", "-1h"}
	for _, id := range events.SystemdMessageIDs {
		args = append(args, "MESSAGE_ID="+id)
	}
	args = append(args, "_PID=1", "+", "FLOCK_EVENT=bus-violation", "FLOCK_EVENT=drift-repaired", "FLOCK_EVENT=dead-lettered",
		"+", "_TRANSPORT=kernel")
	if err := os.WriteFile(path, []byte(mustRun(t, m, args...)), 0o644); err != nil {
		t.Fatal(err)
	}
}
