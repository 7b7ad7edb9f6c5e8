package test

// Tier: root + nspawn + ansible. TestCluster's helpers: tasks sent and
// timed on a host, units waited for, an agent moved between hosts.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/wire"
)

// doneBy counts the tasks of ids agent has stored a result for, as
// flockctl tasks on m says.
func doneBy(t testing.TB, m *harness.Machine, agent int, ids []string) int {
	t.Helper()
	var entries []taskEntry
	if err := json.Unmarshal([]byte(mustRun(t, m, "flockctl", "tasks", "--limit", "100000", "--output", "json")), &entries); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.State == "done" && e.Agent == agent && slices.Contains(ids, e.ID) {
			n++
		}
	}
	return n
}

// changedTasks are the tasks of tasks that changed something.
func changedTasks(tasks map[string]string) []string {
	var out []string
	for name, r := range tasks {
		if r == "changed" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// moveAgent moves agent 3 from c to b with a spec change: --check --diff
// shows the plan on the hosts it concerns and changes nothing, a run
// does it, and the run after changes nothing.
func moveAgent(t *testing.T, h *harness.Hosts, p *harness.AnsiblePlayer) {
	b, c := h.Machine("b"), h.Machine("c")
	moved := map[string]any{"flock_spec": clusterSpecWith(h, "b")}
	r := p.Play(t, moved, "--check", "--diff")
	r.MustSucceed(t)
	for _, name := range []string{"b", "c"} {
		if got := r.HostTasks[name]["Ask flockctl provision --dry-run what it would change"]; got != "changed" {
			t.Errorf("--check: host %s's plan: %q, want changed", name, got)
		}
	}
	if plan := r.Section("Show flockctl's plan"); !strings.Contains(plan, "flock-agent@3") {
		t.Errorf("--check --diff does not show the plans for agent 3:\n%s", plan)
	}
	if st := strings.TrimSpace(clusterRun(t, c, "systemctl", "is-active", unitName(3))); st != "active" {
		t.Errorf("--check stopped agent 3 on c: %s", st)
	}
	t.Logf("--check --diff of agent 3's move:\n%s", r.Section("Show flockctl's plan"))

	r = p.Play(t, moved)
	r.MustSucceed(t)
	clusterWaitUnits(t, b, time.Minute, 2, 3)
	c.Eventually(t, time.Minute, func() error {
		if st := strings.TrimSpace(clusterRun(t, c, "systemctl", "is-active", unitName(3))); st == "active" {
			return fmt.Errorf("agent 3 still runs on c")
		}
		return nil
	})
	a := h.Machine("a")
	var res wire.Result
	out := mustRun(t, a, "flockctl", "send", "--to", "3", "--id", "moved-1", "--output", "json", "fast moved")
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Agent != 3 || !res.OK {
		t.Errorf("a task for agent 3 after its move: %v %s", err, out)
	}
	if !strings.Contains(mustRun(t, b, "journalctl", "-u", unitName(3), "-o", "cat", "--no-pager"), `"task_id":"moved-1"`) {
		t.Errorf("agent 3's task after the move did not run on b")
	}

	r = p.Play(t, moved)
	r.MustSucceed(t)
	for _, name := range h.Names() {
		if rc := r.Recaps[name]; rc.Changed != 0 {
			t.Errorf("the run after the move: host %s changed=%d: %v", name, rc.Changed, changedTasks(r.HostTasks[name]))
		}
	}
}

// clusterRun is run's stdout, whatever the exit status (systemctl
// is-active says "inactive" with status 3).
func clusterRun(t testing.TB, m *harness.Machine, argv ...string) string {
	t.Helper()
	out, _, _ := run(t, m, argv...)
	return out
}

// clusterWaitUnits waits until the agents' units are active on m, as m's
// systemd says (not flockctl status, which also reports other hosts').
func clusterWaitUnits(t testing.TB, m *harness.Machine, timeout time.Duration, ids ...int) {
	t.Helper()
	m.Eventually(t, timeout, func() error {
		for _, id := range ids {
			if st := strings.TrimSpace(clusterRun(t, m, "systemctl", "is-active", "flock.service", unitName(id))); st != "active\nactive" {
				return fmt.Errorf("machine %s: flock.service and %s: %q", m.Name(), unitName(id), st)
			}
		}
		return nil
	})
}

// sendTasks queues one task per id for to (worker or an agent id) on m,
// each "slow <id>", retrying a send the bus refused: while a host goes
// down the streams may change leader. The same id is stored once.
func sendTasks(t *testing.T, m *harness.Machine, to string, ids []string) {
	t.Helper()
	for _, id := range ids {
		for try := 0; ; try++ {
			_, stderr, err := run(t, m, "flockctl", "send", "--to", to, "--id", id, "--no-wait", "slow "+id)
			if err == nil {
				break
			}
			if try > 100 {
				t.Fatalf("send %s: %v\n%s", id, err, stderr)
			}
			t.Logf("send %s: %v (trying again)", id, strings.TrimSpace(stderr))
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sendLatencies sends n tasks to agent `to` on m, one after the other,
// each waited for, and returns how long each took, as an operator sees
// it: flockctl's start, the task stored, run and its result read. A slow
// one (over a second) is logged with when its result was stored, which
// tells a task that waited for its worker from a result read late.
func sendLatencies(t *testing.T, m *harness.Machine, to, prefix string, n int) []time.Duration {
	t.Helper()
	script := fmt.Sprintf(`for i in $(seq 1 %d); do s=$(date +%%s%%N); flockctl send --to %s --id %s-$i "fast $i" >/dev/null || exit 1; e=$(date +%%s%%N); echo $s $e; done`, n, to, prefix)
	var ds []time.Duration
	slow := map[string]time.Time{}
	for i, l := range strings.Split(strings.TrimSpace(mustRun(t, m, "sh", "-c", script)), "\n") {
		var s, e int64
		if _, err := fmt.Sscan(l, &s, &e); err != nil {
			t.Fatalf("latency %q: %v", l, err)
		}
		d := time.Duration(e - s)
		if d > time.Second {
			slow[fmt.Sprintf("%s-%d", prefix, i+1)] = time.Unix(0, s)
		}
		ds = append(ds, d)
	}
	if len(slow) > 0 {
		var entries []taskEntryTime
		if err := json.Unmarshal([]byte(mustRun(t, m, "flockctl", "tasks", "--limit", "100000", "--output", "json")), &entries); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if sent, ok := slow[e.ID]; ok {
				t.Logf("slow task %s for agent %s: its result was stored %v after flockctl send began (state %s, agent %d)",
					e.ID, to, e.Time.Sub(sent).Round(time.Millisecond), e.State, e.Agent)
			}
		}
	}
	return ds
}

// taskEntryTime is a row of flockctl tasks --output json with its time.
type taskEntryTime struct {
	ID    string    `json:"id"`
	State string    `json:"state"`
	Agent int       `json:"agent"`
	Time  time.Time `json:"time"`
}

// monotonic is CLOCK_MONOTONIC now, the clock systemd's *Monotonic
// timestamps are on (the machines share the host's kernel).
func monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(100 * time.Microsecond)
}
