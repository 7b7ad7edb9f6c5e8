package test

// Tier: root + nspawn. Benchmarks, not tests: they print figures against
// the floor measured in the same run and assert nothing about speed.
//
//	go test ./test/ -run '^$' -bench Provision -benchtime 3x

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

const benchAgents = 100

// BenchmarkProvision100 provisions 100 agents with flockctl and, in the
// same machine, the floor: `floor 100` (test/floor), which creates the
// same users through one systemd-sysusers run and starts the same hardened
// transient units straight over D-Bus, with nothing of flock's own on top.
// It also times a no-op re-provision of the 100.
func BenchmarkProvision100(b *testing.B) {
	m := harness.Boot(b)
	n := strconv.Itoa(benchAgents)
	timed := func(argv ...string) time.Duration {
		start := time.Now()
		mustRun(b, m, argv...)
		return time.Since(start)
	}
	var flock, floor, noop time.Duration
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so neither always meets a warmer
		// systemd.
		runFloor := func() {
			floor += timed("floor", n)
			mustRun(b, m, "flockctl", "deprovision", "--all", "--purge")
		}
		if i%2 == 1 {
			runFloor()
		}
		flock += timed("flockctl", "provision", "--agents", n)
		noop += timed("flockctl", "provision", "--agents", n)
		if got := strings.Count(mustRun(b, m, "systemctl", "list-units", "flock-agent@*", "--state=active", "--no-legend", "--plain"), "\n"); got != benchAgents {
			b.Fatalf("%d agent units active, want %d", got, benchAgents)
		}
		mustRun(b, m, "flockctl", "deprovision", "--all", "--purge")
		if i%2 == 0 {
			runFloor()
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(flock), "flock-s")
	b.ReportMetric(per(floor), "floor-s")
	b.ReportMetric(flock.Seconds()/floor.Seconds(), "x-floor")
	b.ReportMetric(per(noop), "noop-s")
	b.ReportMetric(0, "ns/op") // wall time of the loop says nothing here
}
