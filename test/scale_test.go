package test

// Tier: root + nspawn. A thousand agents on one booted systemd: all come
// up and heartbeat, a task goes round, each credential stays in its own
// unit (and out of the host's mount table), one changed agent restarts
// alone, a provision stopped part-way says so and the next converges, and
// deprovision --all --purge leaves nothing. Times are logged, never
// asserted (make bench compares them with their floors).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/counters"
	"github.com/flockrun/flock/test/harness"
)

const scaleAgents = 1000

// scaleSpec is n agents by id, agent 1 a worker that takes tasks; edit,
// if given, changes agent id's entry.
func scaleSpec(n int, id int, edit string) string {
	var b strings.Builder
	b.WriteString("agents:\n  - id: 1\n    command: [\"/usr/bin/tr\", \"a-z\", \"A-Z\"]\n")
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: %d\n", i)
		if i == id {
			b.WriteString(edit)
		}
	}
	return b.String()
}

// serviceUse is a service's main process as the kernel has it: resident
// memory now and at its peak, threads, open descriptors.
func serviceUse(t *testing.T, m *harness.Machine, unit string) string {
	t.Helper()
	pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", unit))
	st := mustRun(t, m, "grep", "-E", "^(VmRSS|VmHWM|Threads):", "/proc/"+pid+"/status")
	fds := strings.TrimSpace(mustRun(t, m, "sh", "-c", "ls /proc/"+pid+"/fd | wc -l"))
	return strings.Join(strings.Fields(st), " ") + " fds: " + fds
}

func TestThousandAgents(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	timedOf := func(what string, do func() string) string {
		t.Helper()
		start := time.Now()
		out := do()
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
		return out
	}
	timed := func(what string, argv ...string) string {
		t.Helper()
		return timedOf(what, func() string { return mustRun(t, m, argv...) })
	}
	mountsBefore := strings.Count(mustRun(t, m, "cat", "/proc/self/mountinfo"), "\n")

	t.Run("a thousand come up and heartbeat", func(t *testing.T) {
		writeSpec(t, m, scaleSpec(scaleAgents, 0, ""))
		timed("provision 1000", "flockctl", "provision", "-f", specPath)
		m.Eventually(t, 3*time.Minute, func() error {
			st := status(t, m)
			if len(st) != scaleAgents {
				return fmt.Errorf("%d agents in status, want %d", len(st), scaleAgents)
			}
			for _, a := range st {
				if a.State != "active" || a.LastHeartbeat == nil {
					return fmt.Errorf("agent %d: %s, heartbeat %v", a.ID, a.State, a.LastHeartbeat)
				}
			}
			return nil
		})
	})

	t.Run("the lifecycle at a thousand", func(t *testing.T) {
		if out := timed("no-op provision at 1000", "flockctl", "provision", "-f", specPath); !strings.Contains(out, "nothing to do") {
			t.Errorf("a second provision changed something:\n%s", out)
		}
		timedOf("status at 1000", func() string { return statusOut(t, m) })
		timedOf("status --output json at 1000", func() string { return statusOut(t, m, "--output", "json") })
		timed("tasks at 1000", "flockctl", "tasks")
		if out := strings.TrimSpace(timed("a task round-trip among 1000", "flockctl", "send", "--to", "1", "hello flock")); out != "HELLO FLOCK" {
			t.Errorf("send to agent 1: %q", out)
		}
	})

	t.Run("a scrape of /metrics at a thousand", func(t *testing.T) {
		harness.MetricsTier.Require(t) // curl
		// One scrape reads every unit's properties over the system bus
		// (16 in flight): timed here, against a real systemd.
		timed("a scrape of /metrics at 1000 (cold)", "curl", "-fsS", "-o", "/dev/null", metricsURL)
		if out := timed("a scrape of /metrics at 1000", "curl", "-fsS", metricsURL); !strings.Contains(out, `flock_agents{state="active"} 1000`) ||
			!strings.Contains(out, `flock_collector_success{source="systemd"} 1`) {
			var got []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "flock_agents") || strings.HasPrefix(l, "flock_collector_success") {
					got = append(got, l)
				}
			}
			logs, _, _ := run(t, m, "sh", "-c", "journalctl -u flock.service --no-pager | grep 'metrics:' | tail -5")
			t.Errorf("/metrics at 1000 agents: no flock_agents{state=\"active\"} 1000 or systemd unread:\n%s\nthe bus's log:\n%s", strings.Join(got, "\n"), logs)
		}
		// The firewall's counters: at most one reader (one netlink read
		// of two sets) per scrape, whatever the number of agents.
		before := socketAccepted(t, m)
		out := timed("a scrape of /metrics at 1000 (with the firewall's counters)", "curl", "-fsS", metricsURL)
		if !strings.Contains(out, `flock_collector_success{source="firewall"} 1`) || !strings.Contains(out, `flock_agent_refused_packets_total{agent="1000"} 0`) {
			t.Errorf("/metrics at 1000 agents: the firewall's counters unread or agent 1000's missing")
		}
		if n := socketAccepted(t, m) - before; n > 1 {
			t.Errorf("one scrape started %d readers, want at most 1", n)
		}
		timed("the counters reader alone at 1000 (connect, start, read, answer)", "curl", "-sS", "--http0.9", "--unix-socket", counters.SocketPath, "http://counters/")
	})

	t.Run("what the bus holds at a thousand", func(t *testing.T) {
		// What flock.service's bounds are sized from (units/service.go):
		// its memory, threads and descriptors with every agent connected.
		t.Logf("flock.service at 1000 agents: %s", serviceUse(t, m, "flock.service"))
	})

	t.Run("each credential is in its own unit, none in the host's mount table", func(t *testing.T) {
		pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", unitName(2)))
		as2 := []string{"nsenter", "-m", "-t", pid, "setpriv", "--reuid=2000000002", "--regid=2000000002", "--clear-groups"}
		if out, _, err := run(t, m, append(as2, "cat", "/var/lib/flock/creds/flock-1.nk")...); err == nil {
			t.Errorf("ESCAPE: agent 2 read agent 1's seed: %q", out)
		}
		own := mustRun(t, m, append(as2, "cat", "/run/flock-agent/nats")...)
		seed2, err := m.ReadFile("/var/lib/flock/creds/flock-2.nk")
		if err != nil || own != string(seed2) {
			t.Errorf("agent 2's /run/flock-agent/nats is not its own seed (%v)", err)
		}
		mounts := mustRun(t, m, "cat", "/proc/self/mountinfo")
		if strings.Contains(mounts, "/creds/") || strings.Contains(mounts, "flock-agent") {
			t.Errorf("the host's mount table has agents' credentials")
		}
		after := strings.Count(mounts, "\n")
		t.Logf("host mount table: %d entries before the flock, %d with 1000 agents", mountsBefore, after)
		if after > mountsBefore+10 {
			t.Errorf("the host's mount table grew from %d to %d entries with the flock", mountsBefore, after)
		}
	})

	t.Run("one changed agent restarts alone", func(t *testing.T) {
		sample := []int{1, 499, 500, 501, scaleAgents}
		before := unitRuns(t, m, sample...)
		writeSpec(t, m, scaleSpec(scaleAgents, 500, "    limits: {memory: 128M}\n"))
		out := timed("one agent changed in 1000", "flockctl", "provision", "-f", specPath)
		if n := strings.Count(out, "restart unit"); n != 1 || !strings.Contains(out, "flock-agent@500.service") {
			t.Errorf("the plan restarts %d units:\n%s", n, out)
		}
		after := unitRuns(t, m, sample...)
		for _, id := range sample {
			if moved := before[id] != after[id]; moved != (id == 500) {
				t.Errorf("agent %d restarted: %v, want %v", id, moved, id == 500)
			}
		}
	})

	t.Run("a provision stopped part-way says so and the next converges", func(t *testing.T) {
		// The bus's config directory read-only: the new agents' users and
		// identities are made, their config cannot be written.
		mustRun(t, m, "mount", "--bind", "-o", "ro", "/etc/flock", "/etc/flock")
		writeSpec(t, m, scaleSpec(scaleAgents+2, 500, "    limits: {memory: 128M}\n"))
		out, errOut, err := run(t, m, "flockctl", "provision", "-f", specPath)
		mustRun(t, m, "umount", "/etc/flock")
		if err == nil {
			t.Fatalf("provision with a read-only /etc/flock succeeded:\n%s", out)
		}
		for _, want := range []string{"stopped at: 1 write bus config", "not begun:", "2 start unit", "run the same provision again"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("the report lacks %q:\n%s", want, errOut)
			}
		}
		timed("the next provision", "flockctl", "provision", "-f", specPath)
		m.Eventually(t, time.Minute, func() error {
			for _, a := range status(t, m) {
				if a.ID > scaleAgents && (a.State != "active" || a.LastHeartbeat == nil) {
					return fmt.Errorf("agent %d: %s, heartbeat %v", a.ID, a.State, a.LastHeartbeat)
				}
			}
			return nil
		})
		if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.Contains(out, "nothing to do") {
			t.Errorf("not converged:\n%s", out)
		}
	})

	t.Run("deprovision --all --purge leaves nothing", func(t *testing.T) {
		timed("deprovision 1002", "flockctl", "deprovision", "--yes", "--all", "--purge")
		assertNothingLeft(t, m)
	})
}
