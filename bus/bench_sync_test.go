package bus

// Tier: unit (no root). A benchmark, not a test: it prints rows of make
// bench's table (test/benchrow), what bus.sync: always (the default)
// costs against the interval flock had before it, on this machine's disk
// (the store is under $TMPDIR), and asserts nothing. Run:
// go test -run '^$' -bench Sync -benchtime 1x ./bus/

import (
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchrow"
)

// BenchmarkSync runs flock's bus twice in one run, syncing always and
// every 2m (nats-server's default, and flock's before bus.sync), with the
// same workers: the time from send to stored (what flockctl send
// --no-wait waits for) and to the task's end, one at a time, and the
// throughput with the queue full.
//
// Tier: unit (no root).
func BenchmarkSync(b *testing.B) {
	sides := [2]*taskBench{flockTasks(b, spec.SyncAlways), flockTasks(b, spec.MaxSync)}
	for _, tb := range sides {
		tb.oneByOne(b, 200) // warm up
	}
	var storedP50, storedP99, doneP50, rates [2][]float64 // per round
	for range b.N {
		for r := range benchTaskRounds {
			for k := range 2 {
				i := (k + r) % 2 // alternate which side goes first
				done, stored := sides[i].oneByOne(b, amount(benchLatencyRuns)/benchTaskRounds)
				p50, p99 := percentiles(stored)
				storedP50[i], storedP99[i] = append(storedP50[i], us(p50)), append(storedP99[i], us(p99))
				p50, _ = percentiles(done)
				doneP50[i] = append(doneP50[i], us(p50))
				d := sides[i].allAtOnce(b, amount(benchTasks)/benchTaskRounds)
				rates[i] = append(rates[i], float64(amount(benchTasks)/benchTaskRounds)/d.Seconds())
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	const note = "Both sides are flock's bus with two flock-agent task loops, in one process, their stores on this machine's disk; flock syncs always (bus.sync's default: each task and result fsynced before it is acknowledged), the floor every 2m (nats-server's default, flock's before bus.sync). Stored: send to JetStream's answer, what flockctl send --no-wait waits for. Rounds alternate; reps are rounds."
	row := func(what, unit string, higher bool, v [2][]float64) {
		benchrow.Print(b, benchrow.Row{Group: "tasks", What: what, Floor: "sync every 2m", Note: note,
			N: 1 + benchWorkers, Unit: unit, Higher: higher, Flock: v[0], Base: v[1]})
	}
	row("send to stored p50, sync always", "µs", false, storedP50)
	row("send to stored p99, sync always", "µs", false, storedP99)
	row("task end to end p50, sync always", "µs", false, doneP50)
	row("task throughput, queue full, sync always", "tasks/s", true, rates)
}
