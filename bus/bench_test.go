package bus

// Tier: unit (no root). Benchmarks, not tests: they print rows of make
// bench's table (test/benchrow) against the targets (p99 ≤ 1.2x
// bare, throughput ≥ 0.9x bare) and assert nothing. Run:
// go test -run '^$' -bench Bus -benchtime 1x ./bus/ (FLOCK_BENCH_QUICK=1:
// a fifth of the work).

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/wire"
)

// Fixed amounts of work, split in rounds that alternate between the two
// servers so drift (CPU frequency, other load) hits both alike.
const (
	benchRounds   = 10
	benchRequests = 20000  // per server
	benchMessages = 500000 // per server
	benchPayload  = 128
)

// amount is full, or a fifth of it in make bench's short form.
func amount(full int) int {
	if benchrow.Quick() {
		return full / 5
	}
	return full
}

// noteBare says what the bus rows' floor is and how they are measured.
const noteBare = "Bare: the same nats-server library as it comes (no users, no permissions) in the same process; flock: ForFlock's users, nkey auth and subject permissions, one client per agent. Rounds alternate between the two; reps are rounds, each row's figure the median of the rounds'."

// benchBus is three clients on one server: orchestrator, worker, monitor.
type benchBus struct {
	orch, worker, monitor *nats.Conn
	echoes                chan struct{} // the worker's answers, as the orchestrator hears them
}

// flockBench is flock's bus: ForFlock's users, nkey auth, permissions,
// the bus's own client.
func flockBench(b *testing.B) *benchBus {
	ids := newIdentities(b, everyone...)
	s := startBus(b, ForFlock(testFlock(), ids.keys()), Options{})
	conn := func(name string) *nats.Conn {
		c, err := dial(s, ids, name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		return c.Conn
	}
	return &benchBus{orch: conn("flock-1"), worker: conn("flock-2"), monitor: conn("flock-3")}
}

// bareBench is nats-server as it comes: no users, no permissions.
func bareBench(b *testing.B) *benchBus {
	conn := bareServer(b, server.Options{})
	return &benchBus{orch: conn(), worker: conn(), monitor: conn()}
}

// bareServer starts the floor the benchmarks compare against: nats-server
// on loopback with o's extra settings (JetStream for the tasks), and
// returns how to connect to it with no credentials.
func bareServer(b *testing.B, o server.Options) (conn func() *nats.Conn) {
	o.Host, o.Port, o.NoSigs = "127.0.0.1", -1, true
	ns, err := server.NewServer(&o)
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("bare nats-server not ready")
	}
	return func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL(), nats.NoReconnect())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
}

// BenchmarkBus compares flock's bus with a bare nats-server in one run:
// round-trip latency (the orchestrator says something on broadcast, the
// worker answers on its events, which the orchestrator hears: no agent may
// answer a request's reply subject on flock's bus) and pub→sub throughput
// (worker's events to the monitor). Durable tasks: BenchmarkTasks.
//
// Tier: unit (no root).
func BenchmarkBus(b *testing.B) {
	b.Run("roundtrip", func(b *testing.B) {
		buses := [2]*benchBus{flockBench(b), bareBench(b)}
		for _, bb := range buses {
			bb.serveTasks(b)
			bb.requests(b, 500) // warm up
		}
		var rtts [2][]time.Duration
		var p50s, p99s [2][]float64 // per round
		for range b.N {
			for r := range benchRounds {
				for k := range 2 {
					i := (k + r) % 2 // alternate which server goes first
					round := buses[i].requests(b, amount(benchRequests)/benchRounds)
					rtts[i] = append(rtts[i], round...)
					p50, p99 := percentiles(round)
					p50s[i], p99s[i] = append(p50s[i], us(p50)), append(p99s[i], us(p99))
				}
			}
		}
		fp50, fp99 := percentiles(rtts[0])
		bp50, bp99 := percentiles(rtts[1])
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(us(fp50), "flock-p50-us")
		b.ReportMetric(us(fp99), "flock-p99-us")
		b.ReportMetric(us(bp50), "bare-p50-us")
		b.ReportMetric(us(bp99), "bare-p99-us")
		b.ReportMetric(us(fp50)/us(bp50), "p50-ratio")
		b.ReportMetric(us(fp99)/us(bp99), "p99-ratio")
		for _, q := range []struct {
			what string
			v    [2][]float64
			goal string
		}{{"bus round trip p50", p50s, ""}, {"bus round trip p99", p99s, "≤ 1.2x bare"}} {
			benchrow.Print(b, benchrow.Row{Group: "bus", What: q.what, Floor: "bare nats-server", Note: noteBare,
				N: 3, Unit: "µs", Flock: q.v[0], Base: q.v[1], Goal: q.goal})
		}
	})
	b.Run("publish", func(b *testing.B) {
		buses := [2]*benchBus{flockBench(b), bareBench(b)}
		for _, bb := range buses {
			bb.stream(b, 10000) // warm up
		}
		var msgs [2]int
		var took [2]time.Duration
		var rates [2][]float64 // per round
		for range b.N {
			for r := range benchRounds {
				for k := range 2 {
					i := (k + r) % 2
					n, d := buses[i].stream(b, amount(benchMessages)/benchRounds)
					msgs[i] += n
					took[i] += d
					rates[i] = append(rates[i], float64(n)/d.Seconds())
				}
			}
		}
		flock, bare := float64(msgs[0])/took[0].Seconds(), float64(msgs[1])/took[1].Seconds()
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(flock, "flock-msgs/s")
		b.ReportMetric(bare, "bare-msgs/s")
		b.ReportMetric(flock/bare, "tput-ratio")
		benchrow.Print(b, benchrow.Row{Group: "bus", What: "bus publish → subscribe throughput", Floor: "bare nats-server", Note: noteBare,
			N: 3, Unit: "msg/s", Higher: true, Flock: rates[0], Base: rates[1], Goal: "≥ 0.9x bare"})
	})
}

// serveTasks makes the worker echo every broadcast on its events, and
// the orchestrator hear them.
func (bb *benchBus) serveTasks(b *testing.B) {
	if _, err := bb.worker.Subscribe(wire.Broadcast, func(m *nats.Msg) { _ = bb.worker.Publish(wire.Events(2), m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := bb.worker.Flush(); err != nil {
		b.Fatal(err)
	}
	bb.echoes = make(chan struct{}, 1)
	if _, err := bb.orch.Subscribe(wire.AllEvents, func(*nats.Msg) { bb.echoes <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	if err := bb.orch.Flush(); err != nil {
		b.Fatal(err)
	}
}

// requests says n things one after the other and returns each round trip.
func (bb *benchBus) requests(b *testing.B, n int) []time.Duration {
	payload := make([]byte, benchPayload)
	rtts := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := bb.orch.Publish(wire.Broadcast, payload); err != nil {
			b.Fatal(err)
		}
		select {
		case <-bb.echoes:
		case <-time.After(5 * time.Second):
			b.Fatal("no echo within 5s")
		}
		rtts = append(rtts, time.Since(start))
	}
	return rtts
}

// stream publishes n events as the worker and returns how many the monitor
// received and how long from the first publish to the last receipt.
func (bb *benchBus) stream(b *testing.B, n int) (int, time.Duration) {
	var got atomic.Int64
	var last atomic.Int64 // unix ns of the last message, set when all arrived
	done := make(chan struct{})
	sub, err := bb.monitor.Subscribe(wire.AllEvents, func(*nats.Msg) {
		if got.Add(1) == int64(n) {
			last.Store(time.Now().UnixNano())
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	sub.SetPendingLimits(-1, -1)
	if err := bb.monitor.Flush(); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, benchPayload)
	start := time.Now()
	for range n {
		if err := bb.worker.Publish(wire.Events(2), payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := bb.worker.Flush(); err != nil {
		b.Fatal(err)
	}
	// All should arrive; a slow consumer would lose some, and then the
	// count stops moving: take what came.
	seen, moved := int64(0), time.Now()
	for {
		select {
		case <-done:
			return n, time.Unix(0, last.Load()).Sub(start)
		case <-time.After(10 * time.Millisecond):
		}
		if g := got.Load(); g != seen {
			seen, moved = g, time.Now()
		} else if time.Since(moved) > 2*time.Second {
			b.Logf("monitor received %d of %d messages", g, n)
			return int(g), moved.Sub(start)
		}
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[len(s)*99/100]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
