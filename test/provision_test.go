package test

// Tier: root + nspawn. The operator's lifecycle on one booted systemd
// machine, in order: a bad spec changes nothing, the example flock comes up
// hardened, provisioning again restarts nothing, one changed agent restarts
// alone, a dropped agent is deprovisioned, and --all --purge leaves nothing.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/test/harness"
)

// maxExposure is the highest systemd-analyze security score an agent unit
// may have ("OK" is below 2; DESIGN measured 1.1-1.3).
const maxExposure = 1.5

const threeAgents = `agents:
  - id: 1
  - id: 2
  - id: 3
`

// agent 2's limits changed, nothing else.
const threeAgentsLimits2 = `agents:
  - id: 1
  - id: 2
    limits: {memory: 128M}
  - id: 3
`

// agent 3 dropped.
const twoAgentsLimits2 = `agents:
  - id: 1
  - id: 2
    limits: {memory: 128M}
`

// badSpecDir is the spec package's corpus of bad specs: NAME.yaml and the
// exact error lines NAME.err, which flockctl must print (after the file
// name) before touching anything.
const badSpecDir = "../spec/testdata/bad"

func TestLifecycle(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)

	t.Run("bad spec on a fresh host changes nothing", func(t *testing.T) {
		assertBadSpecsChangeNothing(t, m)
	})

	t.Run("example flock is up and hardened", func(t *testing.T) {
		example, err := os.ReadFile("../examples/flock.yaml")
		if err != nil {
			t.Fatalf("the 3-agent example: %v", err)
		}
		provision(t, m, string(example))
		st := waitActive(t, m, 1, 2, 3)
		for _, a := range st {
			t.Logf("agent %d: user %s uid %d unit %s %s, level %s (%s)", a.ID, a.User, a.UID, a.Unit, a.State, a.Level, a.Label)
		}
		out := mustRun(t, m, "systemctl", "status", "--no-pager", "flock-agent@3")
		if !strings.Contains(out, "flock-agent@3.service") {
			t.Errorf("systemctl status flock-agent@3 does not show the unit:\n%s", out)
		}
		for _, a := range st {
			e := exposure(t, m, a.ID)
			t.Logf("systemd-analyze security %s: exposure %.1f", unitName(a.ID), e)
			if e > maxExposure {
				t.Errorf("%s exposure %.1f > %.1f", unitName(a.ID), e, maxExposure)
			}
		}
	})

	t.Run("example again restarts nothing", func(t *testing.T) {
		before := unitRuns(t, m, 1, 2, 3)
		mustRun(t, m, "flockctl", "provision", "-f", specPath)
		waitActive(t, m, 1, 2, 3)
		assertRestarted(t, before, unitRuns(t, m, 1, 2, 3))
	})

	t.Run("deprovision --all --purge leaves nothing", func(t *testing.T) {
		mustRun(t, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
		assertNothingLeft(t, m)
	})

	t.Run("changed limits restart only that agent", func(t *testing.T) {
		provision(t, m, threeAgents)
		waitActive(t, m, 1, 2, 3)
		before := unitRuns(t, m, 1, 2, 3)
		provision(t, m, threeAgentsLimits2)
		waitActive(t, m, 1, 2, 3)
		assertRestarted(t, before, unitRuns(t, m, 1, 2, 3), 2)
		// Not enforced in this tier (cgroup v1 controllers are read-only
		// in nspawn), so asserted as the unit's property.
		if got := unitProp(t, m, 2, "MemoryMax"); got != "134217728" {
			t.Errorf("agent 2 MemoryMax = %s, want 134217728 (128M)", got)
		}
	})

	t.Run("bad spec on a provisioned host changes nothing", func(t *testing.T) {
		before := unitRuns(t, m, 1, 2, 3)
		assertBadSpecsChangeNothing(t, m)
		assertRestarted(t, before, unitRuns(t, m, 1, 2, 3))
	})

	t.Run("dropped agent is deprovisioned", func(t *testing.T) {
		before := unitRuns(t, m, 1, 2)
		provision(t, m, twoAgentsLimits2)
		waitActive(t, m, 1, 2)
		assertRestarted(t, before, unitRuns(t, m, 1, 2))
		if out, _, _ := run(t, m, "systemctl", "list-units", "flock-agent@3.service", "--all", "--no-legend", "--plain"); strings.TrimSpace(out) != "" {
			t.Errorf("flock-agent@3 still loaded:\n%s", out)
		}
		if out, _, err := run(t, m, "getent", "passwd", "flock-3"); err == nil {
			t.Errorf("user flock-3 still exists: %s", out)
		}
		if out, _, err := run(t, m, "getent", "group", "flock-3"); err == nil {
			t.Errorf("group flock-3 still exists: %s", out)
		}
	})

	t.Run("deprovision --all --purge again leaves nothing", func(t *testing.T) {
		mustRun(t, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
		assertNothingLeft(t, m)
	})
}

// assertBadSpecsChangeNothing provisions each bad spec and checks the
// refusal names the field and the host is exactly as before.
func assertBadSpecsChangeNothing(t *testing.T, m *harness.Machine) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(badSpecDir, "*.yaml"))
	if err != nil || len(files) < 50 {
		t.Fatalf("bad-spec corpus %s: %d specs (%v), want at least 50", badSpecDir, len(files), err)
	}
	before := hostSnapshot(t, m)
	for _, f := range files {
		name := filepath.Base(f)
		spec, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
		if err != nil {
			t.Fatal(err)
		}
		writeSpec(t, m, string(spec))
		out, errOut, err := run(t, m, "flockctl", "provision", "-f", specPath)
		if err == nil {
			t.Errorf("%s: provision succeeded:\n%s", name, out)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
			if !strings.Contains(errOut, specPath+": "+line) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, line, errOut)
			}
		}
		// Byte for byte, after each one: users, groups, units, the bus,
		// credentials, the ruleset and the directories.
		assertSameHost(t, before, hostSnapshot(t, m))
	}
}

// assertRestarted checks that exactly the agents in want restarted between
// two snapshots of their units.
func assertRestarted(t *testing.T, before, after map[int]unitRun, want ...int) {
	t.Helper()
	should := map[int]bool{}
	for _, id := range want {
		should[id] = true
	}
	for id, b := range before {
		a := after[id]
		restarted := a != b
		switch {
		case restarted && !should[id]:
			t.Errorf("agent %d restarted (ActiveEnter %s -> %s, MainPID %s -> %s)", id, b.ActiveEnter, a.ActiveEnter, b.MainPID, a.MainPID)
		case !restarted && should[id]:
			t.Errorf("agent %d did not restart (MainPID %s)", id, a.MainPID)
		}
	}
}
