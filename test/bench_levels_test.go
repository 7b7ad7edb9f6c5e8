package test

// Tier: root + nspawn, podman and runsc. Start to first heartbeat per
// level, against the floor of each in the same run: a raw `podman run`
// and a raw `runsc run` of the same agent on the same rootfs, without the
// unit or flock's launcher. flock's side is the agent's unit started
// straight over D-Bus (floor start), as provision starts it.
//
//	go test ./test/ -run '^$' -bench Levels -benchtime 5x

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
	requireRuntimes(b)
	m := harness.Boot(b)
	provision(b, m, benchLevelsSpec())
	waitActive(b, m, 1, 2, 3)
	waitBus(b, m, time.Time{}, 1, 2, 3)

	// The raw runs use copies of agents 2's and 3's credentials, owned by
	// their uids, and gVisor's bundle as flock wrote it (its paths moved).
	mustRun(b, m, "sh", "-c", `set -e; mkdir -p /tmp/raw/bundle
		install -m 0400 -o 2000000002 -g 2000000002 /var/lib/flock/creds/flock-2.nk /tmp/raw/nats2
		install -m 0400 -o 2000000003 -g 2000000003 /var/lib/flock/creds/flock-3.nk /tmp/raw/nats3
		sed 's#/run/flock-sandbox/3/nats#/tmp/raw/nats3#' /run/flock-sandbox/3/bundle/config.json > /tmp/raw/bundle/config.json`)
	mustRun(b, m, "systemctl", "stop", "flock-agent@2", "flock-agent@3")

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
			"CREDENTIALS_DIRECTORY=/tmp/raw/cred" + n, "RUNTIME_DIRECTORY=/tmp/raw/run" + n,
			"flock-agent", "sandbox", "--level=" + level, "--runtime=" + map[string]string{"podman": "/usr/bin/podman", "gvisor": "/usr/local/bin/runsc"}[level],
			"--uid=" + uid, "--gid=" + uid, "--shared-gid=2000000000", "--rootfs=" + harness.Rootfs, "--"}
	}
	mustRun(b, m, "sh", "-c", `set -e; for n in 2 3; do mkdir -p /tmp/raw/cred$n /tmp/raw/run$n; cp /var/lib/flock/creds/flock-$n.nk /tmp/raw/cred$n/nats; done`)

	runs := []struct {
		name string
		id   int
		argv []string
		stop []string // after the measure, so the next start is a cold one
	}{
		{"process", 1, []string{"floor", "start", specPath, "1"}, []string{"systemctl", "stop", "flock-agent@1"}},
		{"podman", 2, []string{"floor", "start", specPath, "2"}, []string{"systemctl", "stop", "flock-agent@2"}},
		{"raw-podman", 2, rawPodman, nil},
		{"launcher-podman", 2, launcher(2, "podman"), nil},
		{"gvisor", 3, []string{"floor", "start", specPath, "3"}, []string{"systemctl", "stop", "flock-agent@3"}},
		{"launcher-gvisor", 3, launcher(3, "gvisor"), []string{"runsc", "--root", "/tmp/raw/run3/runsc", "delete", "--force", "flock-agent-3"}},
		{"raw-runsc", 3, rawRunsc, []string{"runsc", "--root", "/tmp/raw/runsc", "delete", "--force", "raw-3"}},
	}
	mustRun(b, m, "systemctl", "stop", "flock-agent@1")
	total := map[string]float64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range runs {
			out := mustRun(b, m, append([]string{"probe", "first-heartbeat", "-agent", strconv.Itoa(r.id), "--"}, r.argv...)...)
			ms, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
			if err != nil {
				b.Fatalf("%s: %q: %v", r.name, out, err)
			}
			total[r.name] += ms
			if r.stop != nil {
				mustRun(b, m, r.stop...)
			}
		}
	}
	b.StopTimer()
	for name, ms := range total {
		b.ReportMetric(ms/float64(b.N), name+"-ms")
	}
	b.ReportMetric(total["podman"]/total["raw-podman"], "podman-x-raw")
	b.ReportMetric(total["gvisor"]/total["raw-runsc"], "gvisor-x-raw")
	b.ReportMetric(0, "ns/op")
}
