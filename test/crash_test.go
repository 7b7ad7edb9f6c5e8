package test

// Tier: root + nspawn. flockctl provision killed with SIGKILL at random
// points, between two specs that create and remove agents, users,
// identities and rules: every next run converges, and nothing is left that
// the spec does not name.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// crashSpecs alternate: the second drops agents 7..12, adds 13..16 and
// changes agent 1's limits, so a kill can land in any kind of change.
var crashSpecs = []struct {
	yaml string
	ids  []int
}{
	{"agents: {count: 12, heartbeat: 5s}\n", seq(1, 12)},
	{"defaults: {heartbeat: 5s}\nagents:\n" + agentList(seq(1, 6)...) + "    limits: {memory: 128M}\n" + agentList(seq(13, 16)...), append(seq(1, 6), seq(13, 16)...)},
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// agentList writes "  - id: N" lines; the last one is open for more fields.
func agentList(ids ...int) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "  - id: %d\n", id)
	}
	return b.String()
}

func TestProvisionSurvivesSIGKILL(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	const kills = 50
	// How long a switch between the two specs takes bounds where a kill
	// can land (the shorter of the two ways, so most kills land mid-run).
	writeSpec(t, m, crashSpecs[0].yaml)
	mustRun(t, m, "flockctl", "provision", "-f", specPath)
	var full time.Duration
	for _, s := range []int{1, 0} {
		writeSpec(t, m, crashSpecs[s].yaml)
		start := time.Now()
		mustRun(t, m, "flockctl", "provision", "-f", specPath)
		if d := time.Since(start); full == 0 || d < full {
			full = d
		}
	}
	t.Logf("switching specs takes at least %s here; killing at random points within it", full.Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x666c6f636b))
	landed := 0
	for i := range kills {
		s := crashSpecs[(i+1)%2]
		writeSpec(t, m, s.yaml)
		delay := time.Duration(rng.Int64N(int64(full)))
		// Killed mid-way (or not at all if it finished first; counted).
		out := mustRun(t, m, "sh", "-c", fmt.Sprintf(
			"flockctl provision -f %s >/dev/null 2>&1 & p=$!; sleep %.3f; if kill -9 $p 2>/dev/null; then echo killed; fi; wait $p; true",
			specPath, delay.Seconds()))
		if strings.Contains(out, "killed") {
			landed++
		}
		// The next run finishes the job.
		if _, stderr, err := run(t, m, "flockctl", "provision", "-f", specPath); err != nil {
			t.Fatalf("kill %d (after %s): the next provision failed: %v\n%s", i, delay.Round(time.Millisecond), err, stderr)
		}
		assertConverged(t, m, s.ids, fmt.Sprintf("kill %d (after %s)", i, delay.Round(time.Millisecond)))
		if t.Failed() {
			return
		}
	}
	t.Logf("%d of %d kills landed before provision finished; every next run converged", landed, kills)
	if landed < kills/2 {
		t.Errorf("only %d of %d kills landed mid-run: the test did not exercise crashes", landed, kills)
	}
}

// assertConverged checks the host is exactly the spec: no drift in status,
// a further provision has nothing to do, and no user, unit or credential
// of an agent the spec does not name.
func assertConverged(t *testing.T, m *harness.Machine, ids []int, when string) {
	t.Helper()
	// Start jobs the killed run queued finish on their own: wait for them.
	m.Eventually(t, 60*time.Second, func() error {
		var rows []struct {
			ID    int    `json:"id"`
			State string `json:"state"`
			Drift string `json:"drift"`
		}
		out := statusOut(t, m, "--output", "json")
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			return fmt.Errorf("%s: status: %w", when, err)
		}
		for _, r := range rows {
			if r.Drift != "" || r.State != "active" {
				return fmt.Errorf("%s: agent %d is %s, drift %q", when, r.ID, r.State, r.Drift)
			}
		}
		return nil
	})
	if again := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.HasPrefix(again, "nothing to do") {
		t.Errorf("%s: not converged, a further provision plans:\n%s", when, again)
	}
	// The flock's own identities beside the agents': the operator's and
	// the readers' (flock-readers).
	own := []string{"operator", "reader"}
	want := map[string]bool{}
	for _, c := range own {
		want[c] = true
	}
	for _, id := range ids {
		want[fmt.Sprintf("flock-%d", id)] = true
	}
	var have []string
	users := mustRun(t, m, "sh", "-c", "getent passwd | cut -d: -f1 | grep '^flock-[0-9]' || true")
	units := mustRun(t, m, "sh", "-c", "systemctl list-units 'flock-agent@*' --all --no-legend --plain | awk '{print $1}'")
	creds := mustRun(t, m, "sh", "-c", "ls /var/lib/flock/creds | sed 's/\\.nk$//'")
	for _, u := range strings.Fields(users) {
		have = append(have, "user "+u)
		if !want[u] {
			t.Errorf("%s: orphan user %s", when, u)
		}
	}
	for _, u := range strings.Fields(units) {
		name := "flock-" + strings.TrimSuffix(strings.TrimPrefix(u, "flock-agent@"), ".service")
		have = append(have, "unit "+u)
		if !want[name] {
			t.Errorf("%s: orphan unit %s", when, u)
		}
	}
	for _, c := range strings.Fields(creds) {
		have = append(have, "cred "+c)
		if !want[c] {
			t.Errorf("%s: orphan credential %s", when, c)
		}
	}
	if n := len(have); n != 3*len(ids)+len(own) {
		sort.Strings(have)
		t.Errorf("%s: want %d users, units and credentials (and %s's credentials), have %d: %v", when, 3*len(ids)+len(own), strings.Join(own, " and "), n, have)
	}
}

// A provision killed after it installed flock.service's new file and
// before it restarted the bus leaves the restart marked owed (all a
// killed run leaves besides the file, here written as it would): the
// next run restarts the bus, clears the mark, and the one after has
// nothing to do.
func TestARestartOwedIsDone(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, crashSpecs[0].yaml)
	pid := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock.service")
	mustRun(t, m, "sh", "-c", "mkdir -p /run/flockctl-restart-owed && : > /run/flockctl-restart-owed/flock.service")
	if out := statusOut(t, m); !strings.Contains(out, "a provision was stopped before it restarted it") {
		t.Errorf("status does not show the restart owed as drift:\n%s", out)
	}
	out := mustRun(t, m, "flockctl", "provision", "-f", specPath)
	if !strings.Contains(out, "flock.service (a provision was stopped before it restarted it: it runs its former unit file)") {
		t.Errorf("provision with a restart owed:\n%s", out)
	}
	if now := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock.service"); now == pid {
		t.Errorf("the bus's MainPID is still %s: not restarted", strings.TrimSpace(pid))
	}
	if _, _, err := run(t, m, "test", "-e", "/run/flockctl-restart-owed/flock.service"); err == nil {
		t.Errorf("the mark is still there after the restart")
	}
	if _, _, err := run(t, m, "test", "-e", "/run/flockctl-restart-owed"); err == nil {
		t.Errorf("the marks' directory outlives its last mark")
	}
	if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.Contains(out, "nothing to do") {
		t.Errorf("provisioned again:\n%s", out)
	}
	waitActive(t, m, crashSpecs[0].ids...)
}
