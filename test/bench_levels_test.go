package test

// Tier: root + nspawn, podman and runsc. Start to first heartbeat per
// level, against the floor of each in the same run: flock-agent run
// straight as the agent's uid (level process), a raw `podman run` and a
// raw `runsc run` of the same agent on the same rootfs, without the unit or
// flock's launcher. flock's side is the agent's unit started straight over
// D-Bus (floor start), as provision starts it. Rows of make bench's table
// (test/benchrow); nothing about speed is asserted.
//
//	go test ./test/ -run '^$' -bench Levels -benchtime 1x

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/test/harness"
)

// Agents 1..3 run flock-agent's own program (heartbeats only) at each level.
func benchLevelsSpec() string {
	return fmt.Sprintf(`defaults:
  heartbeat: 1m
agents:
  - id: 1
  - id: 2
    level: podman
    rootfs: %[1]s
  - id: 3
    level: gvisor
    rootfs: %[1]s
`, harness.Rootfs)
}

// rawEnv is the environment flock gives agent id inside a container.
func rawEnv(id int) []string {
	return []string{"AGENT_ID=" + strconv.Itoa(id), "AGENT_ROLE=worker", "NATS_URL=nats://127.0.0.1:4222",
		"NATS_NKEY=/.flock/nats", "FLOCK_HEARTBEAT=1m", "HOME=/", "FLOCK_LOG_FILE=/dev/null", "SHARED_DIR=/"}
}

func BenchmarkLevels(b *testing.B) {
	// Tier: root + nspawn, podman and runsc.
	requireRuntimes(b)
	m := harness.Boot(b)
	provision(b, m, benchLevelsSpec())
	waitActive(b, m, 1, 2, 3)
	waitBus(b, m, time.Time{}, 1, 2, 3)

	// The raw runs use copies of agents 2's and 3's credentials, owned by
	// their uids, and gVisor's bundle as flock wrote it, the credential it
	// binds (units.CredentialPath, the unit's own) moved to the copy.
	mustRun(b, m, "sh", "-c", `set -e; mkdir -p /tmp/raw/bundle
		install -m 0400 -o 2000000002 -g 2000000002 /var/lib/flock/creds/flock-2.nk /tmp/raw/nats2
		install -m 0400 -o 2000000003 -g 2000000003 /var/lib/flock/creds/flock-3.nk /tmp/raw/nats3
		sed 's#"/run/flock-agent/nats"#"/tmp/raw/nats3"#' /run/flock-sandbox/3/bundle/config.json > /tmp/raw/bundle/config.json
		grep -q '"/tmp/raw/nats3"' /tmp/raw/bundle/config.json`)
	stopCollected(b, m, unitName(2), unitName(3))

	rawPodman := []string{"podman", "run", "--rm", "--cgroups=disabled", "--network=host", "--user", "2000000002:2000000002",
		"--volume", "/usr/local/bin/flock-agent:/.flock/flock-agent:ro", "--volume", "/tmp/raw/nats2:/.flock/nats:ro"}
	for _, kv := range rawEnv(2) {
		rawPodman = append(rawPodman, "--env", kv)
	}
	rawPodman = append(rawPodman, "--rootfs", harness.Rootfs, "/.flock/flock-agent")
	rawRunsc := []string{"runsc", "--root", "/tmp/raw/runsc", "--ignore-cgroups", "--network=host", "--overlay2=none",
		"run", "--bundle", "/tmp/raw/bundle", "raw-3"}

	// The launcher alone, outside systemd: flock's podman and runsc
	// command lines without the unit, to tell the unit's share from
	// the flags'.
	launcher := func(id int, level string) []string {
		n := strconv.Itoa(id)
		uid := strconv.Itoa(2000000000 + id)
		return []string{"env", "AGENT_ID=" + n, "AGENT_ROLE=worker", "NATS_URL=nats://127.0.0.1:4222", "FLOCK_HEARTBEAT=1m",
			"HOME=/srv/flock/agents/" + n, "FLOCK_LOG_FILE=/srv/flock/logs/" + n + ".log", "SHARED_DIR=/srv/flock/common",
			"NATS_NKEY=/tmp/raw/cred" + n + "/nats", "RUNTIME_DIRECTORY=/tmp/raw/run" + n,
			"flock-agent", "sandbox", "--level=" + level, "--runtime=" + map[string]string{"podman": "/usr/bin/podman", "gvisor": "/usr/local/bin/runsc"}[level],
			"--uid=" + uid, "--gid=" + uid, "--shared-gid=2000000000", "--rootfs=" + harness.Rootfs, "--"}
	}
	// Level process's floor: the same program and environment, started as
	// the agent's uid by setpriv instead of a unit.
	rawProcess := []string{"setpriv", "--reuid=2000000001", "--regid=2000000001", "--clear-groups",
		"env", "-i", "AGENT_ID=1", "AGENT_ROLE=worker", "NATS_URL=nats://127.0.0.1:4222", "NATS_NKEY=/tmp/raw/cred1/nats",
		"FLOCK_HEARTBEAT=1m", "HOME=/srv/flock/agents/1", "FLOCK_LOG_FILE=/srv/flock/logs/1.log", "SHARED_DIR=/srv/flock/common",
		"/usr/local/bin/flock-agent"}
	mustRun(b, m, "sh", "-c", `set -e; for n in 1 2 3; do mkdir -p /tmp/raw/cred$n /tmp/raw/run$n; install -o $((2000000000+n)) -g $((2000000000+n)) -m 0400 /var/lib/flock/creds/flock-$n.nk /tmp/raw/cred$n/nats; done`)

	runs := []struct {
		name string
		id   int
		argv []string
		stop []string // after the measure, so the next start is a cold one
		unit string   // stopped and collected after the measure, for the same reason
	}{
		{"process", 1, []string{"floor", "start", specPath, "1"}, nil, unitName(1)},
		{"raw-process", 1, rawProcess, nil, ""},
		{"podman", 2, []string{"floor", "start", specPath, "2"}, nil, unitName(2)},
		{"raw-podman", 2, rawPodman, nil, ""},
		{"launcher-podman", 2, launcher(2, "podman"), nil, ""},
		{"gvisor", 3, []string{"floor", "start", specPath, "3"}, nil, unitName(3)},
		{"launcher-gvisor", 3, launcher(3, "gvisor"), []string{"runsc", "--root", "/tmp/raw/run3/runsc", "delete", "--force", "flock-agent-3"}, ""},
		{"raw-runsc", 3, rawRunsc, []string{"runsc", "--root", "/tmp/raw/runsc", "delete", "--force", "raw-3"}, ""},
	}
	stopCollected(b, m, unitName(1))
	ms := map[string][]float64{}
	for range benchrow.Reps(5) {
		for _, r := range runs {
			out := mustRun(b, m, append([]string{"probe", "first-heartbeat", "-agent", strconv.Itoa(r.id), "--"}, r.argv...)...)
			v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
			if err != nil {
				b.Fatalf("%s: %q: %v", r.name, out, err)
			}
			ms[r.name] = append(ms[r.name], v)
			if r.unit != "" {
				ms["setup-"+r.name] = append(ms["setup-"+r.name], unitSetup(b, m, r.unit))
			}
			if r.stop != nil {
				mustRun(b, m, r.stop...)
			}
			if r.unit != "" {
				stopCollected(b, m, r.unit)
			}
		}
	}
	const note = "From starting it to the agent's first heartbeat as the operator hears it (probe first-heartbeat). flock: its unit started over D-Bus (floor start). raw: flock-agent with the same environment and credential, as the agent's uid (setpriv), in `podman run --rootfs` or `runsc run` of the same rootfs, no unit, no launcher. launcher: `flock-agent sandbox` (flock's podman or runsc command line) run outside systemd."
	for _, row := range []struct{ what, flock, floor, floorName string }{
		{"start to first heartbeat, level process", "process", "raw-process", "raw process"},
		{"start to first heartbeat, level podman", "podman", "raw-podman", "raw podman run"},
		{"start to first heartbeat, level gvisor", "gvisor", "raw-runsc", "raw runsc run"},
		{"flock's launcher alone, podman", "launcher-podman", "raw-podman", "raw podman run"},
		{"flock's launcher alone, gvisor", "launcher-gvisor", "raw-runsc", "raw runsc run"},
	} {
		benchrow.Print(b, benchrow.Row{Group: "start", What: row.what, Floor: row.floorName, Note: note,
			Unit: "ms", Flock: ms[row.flock], Base: ms[row.floor]})
	}

	// Where a unit's start goes, by systemd's own clock: its set-up (the
	// namespaces, mounts and filters) of the agents' units above, and of
	// a unit as agent 1's user with each group of level process's walls
	// alone (floor walls), against the same unit with none.
	var walls map[string][]float64
	if err := json.Unmarshal([]byte(mustRun(b, m, "floor", "walls", specPath, "1", strconv.Itoa(benchrow.Reps(5)))), &walls); err != nil {
		b.Fatalf("floor walls: %v", err)
	}
	const setupNote = "systemd's own set-up of a unit: from its InactiveExitTimestamp to its ActiveEnterTimestamp (Type=exec: the command is exec'd, every namespace, mount and filter in place). Floor: a unit as the agent's user running sleep with none of the walls. Walls alone: the same unit with one group of level process's walls as flock plans them (test/floor walls)."
	for _, l := range []string{"process", "podman", "gvisor"} {
		benchrow.Print(b, benchrow.Row{Group: "start", What: "systemd's set-up of the agent's unit, level " + l, Floor: "bare unit",
			Note: setupNote, Unit: "ms", Flock: ms["setup-"+l], Base: walls["bare"]})
	}
	for _, g := range []struct{ key, what string }{
		{"all", "all of level process's walls"}, {"files", "file system walls"}, {"private", "private /tmp, devices, IPC, users"},
		{"proc", "ProtectProc=invisible"}, {"kernel", "kernel walls (ProtectKernel*, clock, hostname)"}, {"syscalls", "system call walls (filter, W^X, no privileges)"},
	} {
		benchrow.Print(b, benchrow.Row{Group: "start", What: "unit set-up with " + g.what, Floor: "bare unit",
			Note: setupNote, Unit: "ms", Flock: walls[g.key], Base: walls["bare"]})
	}
}

// unitSetup is systemd's own set-up time of unit's last start, in ms.
func unitSetup(b *testing.B, m *harness.Machine, unit string) float64 {
	b.Helper()
	p := parseProps(mustRun(b, m, "systemctl", "show", "-p", "InactiveExitTimestampMonotonic,ActiveEnterTimestampMonotonic", unit))
	exit, err1 := strconv.ParseUint(p["InactiveExitTimestampMonotonic"], 10, 64)
	active, err2 := strconv.ParseUint(p["ActiveEnterTimestampMonotonic"], 10, 64)
	if err1 != nil || err2 != nil || exit == 0 || active < exit {
		b.Fatalf("%s: start timestamps %v", unit, p)
	}
	return float64(active-exit) / 1000
}
