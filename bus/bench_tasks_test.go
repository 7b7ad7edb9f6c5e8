package bus

// Tier: unit (no root). A benchmark, not a test: it prints rows of make
// bench's table (test/benchrow) against issue 5's targets (throughput ≥
// 0.7x bare JetStream, p50 end to end ≤ 2 ms) and asserts nothing. Run:
// go test -run '^$' -bench Tasks -benchtime 1x ./bus/

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/wire"
)

const (
	benchTaskRounds  = 10
	benchLatencyRuns = 2000  // per side, one task at a time
	benchTasks       = 20000 // per side, all sent at once
	benchWorkers     = 2
)

// taskBench is one side: a sender storing tasks, workers taking them, and
// a watcher that sees each task's final acknowledgement (the end of a
// task's way: its result is stored before the worker acknowledges).
type taskBench struct {
	js    jetstream.JetStream // the sender's
	acked chan struct{}       // one per acknowledged task
	seq   atomic.Int64
}

// watchAcks counts "+ACK" on the task stream's acknowledgement subjects.
func (tb *taskBench) watchAcks(b *testing.B, nc *nats.Conn) {
	tb.acked = make(chan struct{}, benchTasks)
	sub, err := nc.Subscribe("$JS.ACK."+wire.TasksStream+".>", func(m *nats.Msg) {
		if string(m.Data) == "+ACK" {
			tb.acked <- struct{}{}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
}

// flockTasks is flock's bus: agents 2 and 4 run flock-agent's task loop
// (agent.ServeTasks, logging as it does), the orchestrator sends. It
// syncs as sync says (spec.Bus.Sync).
func flockTasks(b *testing.B, sync time.Duration) *taskBench {
	ids := newIdentities(b, everyoneAnd4...)
	s := taskBus(b, ids, Options{}, func(c *Config) { c.Tasks.AckWait, c.Tasks.Sync = DefaultAckWait, sync })
	echo := func(_ context.Context, t agent.Task) wire.Result {
		return wire.Result{OK: true, Output: string(t.Payload)}
	}
	for _, id := range []int{2, 4}[:benchWorkers] {
		env := agent.Env{ID: id, Role: "worker", NATSURL: s.ClientURL(), NKeyFile: seedFile(b, ids, "flock-"+strconv.Itoa(id))}
		a, err := agent.Connect(context.Background(), env, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = a.ServeTasks(ctx, "worker", echo); close(done) }()
		b.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	}
	tb := &taskBench{}
	tb.watchAcks(b, connect(b, s, ids, creds.OperatorName).Conn)
	// The operator sends, as flockctl send does (an orchestrator's tasks
	// go through the desk: BenchmarkShares measures that path).
	js, err := jetstream.New(connect(b, s, ids, creds.OperatorName).Conn)
	if err != nil {
		b.Fatal(err)
	}
	tb.js = js
	return tb
}

// bareTasks is JetStream as it comes but for its sync policy, which is
// flock's default (always): no users, a plain work-queue stream and a
// results stream, workers doing the same steps by hand (pull one, store
// the result, acknowledge).
func bareTasks(b *testing.B) *taskBench {
	conn := bareServer(b, server.Options{JetStream: true, StoreDir: b.TempDir(), SyncAlways: true})
	ctx := context.Background()
	js, err := jetstream.New(conn())
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range []jetstream.StreamConfig{
		{Name: "TASKS", Subjects: []string{"tasks.>"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "RESULTS", Subjects: []string{"task.result"}},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, "TASKS", jetstream.ConsumerConfig{Durable: "worker", FilterSubject: "tasks.worker", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		b.Fatal(err)
	}
	for range benchWorkers {
		wjs, err := jetstream.New(conn())
		if err != nil {
			b.Fatal(err)
		}
		cons, err := wjs.Consumer(ctx, "TASKS", "worker")
		if err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
				if err != nil {
					continue
				}
				res := nats.NewMsg("task.result")
				res.Header.Set(wire.MsgIDHeader, "result-"+m.Headers().Get(wire.MsgIDHeader))
				res.Data = m.Data()
				if _, err := wjs.PublishMsg(ctx, res); err == nil {
					_ = m.DoubleAck(ctx)
				}
			}
		}()
		b.Cleanup(func() { close(stop); <-done })
	}
	tb := &taskBench{js: js}
	tb.watchAcks(b, conn())
	return tb
}

func (tb *taskBench) task() *nats.Msg {
	id := "t-" + strconv.FormatInt(tb.seq.Add(1), 10)
	m := nats.NewMsg(wire.RoleTasks("worker"))
	m.Header.Set(wire.TaskIDHeader, id)
	m.Header.Set(wire.MsgIDHeader, id)
	m.Data = make([]byte, benchPayload)
	return m
}

// oneByOne sends n tasks, each once the last was acknowledged, and returns
// each one's time from send to acknowledgement, and from send to stored
// (JetStream's answer to the publish: what flockctl send --no-wait waits
// for).
func (tb *taskBench) oneByOne(b *testing.B, n int) (done, stored []time.Duration) {
	done, stored = make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := tb.js.PublishMsg(context.Background(), tb.task()); err != nil {
			b.Fatal(err)
		}
		stored = append(stored, time.Since(start))
		select {
		case <-tb.acked:
		case <-time.After(10 * time.Second):
			b.Fatal("a task was not acknowledged within 10s")
		}
		done = append(done, time.Since(start))
	}
	return done, stored
}

// allAtOnce sends n tasks without waiting and returns how long until
// every one was acknowledged.
func (tb *taskBench) allAtOnce(b *testing.B, n int) time.Duration {
	start := time.Now()
	for range n {
		if _, err := tb.js.PublishMsgAsync(tb.task()); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		select {
		case <-tb.acked:
		case <-time.After(30 * time.Second):
			b.Fatal("tasks stopped being acknowledged")
		}
	}
	return time.Since(start)
}

// BenchmarkTasks compares durable tasks through flock's bus (nkey users,
// permissions, the bus's streams and consumers, flock-agent's task loop
// with its keep-alive and logging) with bare JetStream in one run:
// end-to-end latency of one task at a time (stored, taken by a worker,
// result stored, acknowledged) and throughput with the queue full.
//
// Tier: unit (no root).
func BenchmarkTasks(b *testing.B) {
	sides := [2]*taskBench{flockTasks(b, spec.SyncAlways), bareTasks(b)}
	for _, tb := range sides {
		tb.oneByOne(b, 200) // warm up
	}
	var lat [2][]time.Duration
	var took [2]time.Duration
	var p50s, p99s, rates [2][]float64 // per round
	for range b.N {
		for r := range benchTaskRounds {
			for k := range 2 {
				i := (k + r) % 2 // alternate which side goes first
				round, _ := sides[i].oneByOne(b, amount(benchLatencyRuns)/benchTaskRounds)
				lat[i] = append(lat[i], round...)
				p50, p99 := percentiles(round)
				p50s[i], p99s[i] = append(p50s[i], us(p50)), append(p99s[i], us(p99))
				d := sides[i].allAtOnce(b, amount(benchTasks)/benchTaskRounds)
				took[i] += d
				rates[i] = append(rates[i], float64(amount(benchTasks)/benchTaskRounds)/d.Seconds())
			}
		}
	}
	fp50, fp99 := percentiles(lat[0])
	bp50, bp99 := percentiles(lat[1])
	sent := float64(b.N * amount(benchTasks) / benchTaskRounds * benchTaskRounds)
	flock, bare := sent/took[0].Seconds(), sent/took[1].Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(us(fp50), "flock-p50-us")
	b.ReportMetric(us(fp99), "flock-p99-us")
	b.ReportMetric(us(bp50), "bare-p50-us")
	b.ReportMetric(us(bp99), "bare-p99-us")
	b.ReportMetric(flock, "flock-tasks/s")
	b.ReportMetric(bare, "bare-tasks/s")
	b.ReportMetric(flock/bare, "tput-ratio")
	const note = "Bare: JetStream as it comes (no users) but syncing always, as flock does by default, a work-queue stream and a results stream, two workers pulling, storing the result and acknowledging by hand; flock: the bus's streams and consumers, two flock-agent task loops (agent.ServeTasks). End to end: stored, taken, result stored, acknowledged. Rounds alternate; reps are rounds."
	row := func(what, unit string, higher bool, v [2][]float64, goal string) {
		benchrow.Print(b, benchrow.Row{Group: "tasks", What: what, Floor: "bare JetStream", Note: note,
			N: 1 + benchWorkers, Unit: unit, Higher: higher, Flock: v[0], Base: v[1], Goal: goal})
	}
	row("task end to end p50, one at a time", "µs", false, p50s, "≤ 2 ms")
	row("task end to end p99, one at a time", "µs", false, p99s, "")
	row("task throughput, queue full", "tasks/s", true, rates, "≥ 0.7x bare")
}
