package bus

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// TestTaskTakenOnce: tasks for any worker are each run once by one of two
// workers, a task addressed to one goes to it alone, each has exactly one
// stored result, and sending a task id again is not stored nor run again.
//
// Tier: unit (no root).
func TestTaskTakenOnce(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, nil)
	op := connect(t, s, ids, creds.OperatorName)
	e := newEcho()
	startWorker(t, s.ClientURL(), ids, 2, e.handler(2))
	startWorker(t, s.ClientURL(), ids, 4, e.handler(4))

	tasks := taskIDs("any", 20)
	for _, id := range tasks {
		send(t, op.Conn, wire.RoleTasks("worker"), id, "payload of "+id)
	}
	send(t, op.Conn, wire.AgentTasks(4), "to-4", "for four")
	got := waitResults(t, op.Conn, 10*time.Second, append(tasks, "to-4")...)
	waitEmpty(t, op.Conn)

	by := map[int]int{}
	for _, id := range tasks {
		ran := e.ranBy(id)
		if len(ran) != 1 {
			t.Errorf("task %s ran %d times (agents %v)", id, len(ran), ran)
			continue
		}
		by[ran[0]]++
		if r := got[id]; len(r) != 1 || !r[0].OK || r[0].Output != "payload of "+id || r[0].Agent != ran[0] {
			t.Errorf("task %s: stored results %+v", id, r)
		}
	}
	if r := got["to-4"]; len(r) != 1 || r[0].Agent != 4 || !slices.Equal(e.ranBy("to-4"), []int{4}) {
		t.Errorf("the task for agent 4: results %+v, ran by %v", r, e.ranBy("to-4"))
	}
	t.Logf("tasks for any worker taken by agent 2: %d, agent 4: %d", by[2], by[4])

	before := streamMsgs(t, op.Conn, wire.ResultsStream)
	again := send(t, op.Conn, wire.RoleTasks("worker"), tasks[3], "sent again")
	if !again.Duplicate {
		t.Fatalf("sending task %s again was stored as a new task (sequence %d)", tasks[3], again.Seq)
	}
	// The bus stored nothing, so nothing can run: the queue stays empty.
	if n := streamMsgs(t, op.Conn, wire.TasksStream); n != 0 {
		t.Errorf("TASKS holds %d after a duplicate", n)
	}
	if after := streamMsgs(t, op.Conn, wire.ResultsStream); after != before {
		t.Errorf("RESULTS went from %d to %d after a duplicate", before, after)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The first one's result is found, as flockctl send --wait finds it.
	res, err := operator.WaitResult(ctx, op.Conn, tasks[3], again.At.Add(-wire.TaskDedupWindow))
	if err != nil || res.TaskID != tasks[3] || res.Output != "payload of "+tasks[3] {
		t.Errorf("the result of the resent task: %+v, %v", res, err)
	}
}

// TestWorkerDiesMidTask: a worker whose connection closes while it runs a
// task never acknowledges it; the task goes to the other worker after the
// ack wait, finishes, and has exactly one stored result.
//
// Tier: unit (no root).
func TestWorkerDiesMidTask(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, nil)
	op := connect(t, s, ids, creds.OperatorName)

	started, release := make(chan agent.Task, 1), make(chan struct{})
	defer close(release)
	doomed := startWorker(t, s.ClientURL(), ids, 2, func(ctx context.Context, task agent.Task) wire.Result {
		started <- task
		<-release // stuck: the worker dies holding it
		return wire.Result{OK: true, Output: "from the dead"}
	})
	send(t, op.Conn, wire.RoleTasks("worker"), "t-1", "work")
	var first agent.Task
	select {
	case first = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first worker never got the task")
	}
	doomed.a.Conn().Close() // kill -9, as far as the bus can tell

	e := newEcho()
	var deliveries atomic.Uint64
	startWorker(t, s.ClientURL(), ids, 4, func(ctx context.Context, task agent.Task) wire.Result {
		deliveries.Store(task.Delivery)
		return e.handler(4)(ctx, task)
	})
	got := waitResults(t, op.Conn, 15*time.Second, "t-1")
	waitEmpty(t, op.Conn)
	if r := got["t-1"]; len(r) != 1 || r[0].Agent != 4 || r[0].Output != "work" {
		t.Errorf("stored results %+v, want one, by agent 4", r)
	}
	if first.Delivery != 1 || deliveries.Load() != 2 || !slices.Equal(e.ranBy("t-1"), []int{4}) {
		t.Errorf("deliveries: first %d, then %d (ran by %v); want 1 then 2 by agent 4", first.Delivery, deliveries.Load(), e.ranBy("t-1"))
	}
}

// TestLongTaskNotRedelivered: a task running three times the ack wait is
// kept by its worker (it says it is in progress) and handed to no one
// else.
//
// Tier: unit (no root).
func TestLongTaskNotRedelivered(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, nil)
	op := connect(t, s, ids, creds.OperatorName)
	e := newEcho()
	var mu sync.Mutex
	var deliveries []uint64
	slow := func(id int) agent.Handler {
		return func(ctx context.Context, task agent.Task) wire.Result {
			mu.Lock()
			deliveries = append(deliveries, task.Delivery)
			mu.Unlock()
			time.Sleep(3500 * time.Millisecond) // the task's own length: 3.5 ack waits
			return e.handler(id)(ctx, task)
		}
	}
	startWorker(t, s.ClientURL(), ids, 2, slow(2))
	startWorker(t, s.ClientURL(), ids, 4, slow(4))
	send(t, op.Conn, wire.RoleTasks("worker"), "long", "x")
	got := waitResults(t, op.Conn, 15*time.Second, "long")
	waitEmpty(t, op.Conn)
	mu.Lock()
	defer mu.Unlock()
	if len(got["long"]) != 1 || len(e.ranBy("long")) != 1 || !slices.Equal(deliveries, []uint64{1}) {
		t.Errorf("results %+v, ran by %v, deliveries %v; want one of each", got["long"], e.ranBy("long"), deliveries)
	}
}

// TestDeadLetter: a task whose worker dies every time it has it lands in
// DEAD after max_deliveries, leaves TASKS, and gets one failed result
// from the bus; flockctl send --wait and flockctl tasks see it. The server
// gives up on the task when a worker next asks for work (here: the agent
// restarted, as systemd restarts it), and that worker does not get it.
//
// Tier: unit (no root).
func TestDeadLetter(t *testing.T) {
	t.Parallel()
	const maxDeliveries = 3
	ids := newIdentities(t, everyoneAnd4...)
	rec := &recWriter{}
	s := taskBus(t, ids, Options{Events: rec}, func(c *Config) { c.Tasks.MaxDeliveries = maxDeliveries })
	op := connect(t, s, ids, creds.OperatorName)
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	// The sender's headers go to DEAD with the task; JetStream's would
	// make DEAD refuse it.
	task := nats.NewMsg(wire.RoleTasks("worker"))
	task.Header.Set(wire.TaskIDHeader, "doomed")
	task.Header.Set("X-Job", "7")
	task.Header.Set("Nats-Expected-Stream", wire.TasksStream)
	task.Data = []byte("poison")
	sentAt := time.Now()
	if _, err := js.PublishMsg(context.Background(), task); err != nil {
		t.Fatal(err)
	}

	for n := 1; n <= maxDeliveries; n++ {
		got, ready := make(chan agent.Task, 1), make(chan struct{})
		var w *worker
		w = startWorker(t, s.ClientURL(), ids, 2, func(ctx context.Context, task agent.Task) wire.Result {
			<-ready
			w.a.Conn().Close() // the agent dies with the task in hand
			got <- task
			return wire.Result{OK: true, Output: "never stored"}
		})
		close(ready)
		select {
		case task := <-got:
			if task.ID != "doomed" || task.Delivery != uint64(n) {
				t.Fatalf("delivery %d: got %s, delivery %d", n, task.ID, task.Delivery)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d never came", n)
		}
	}
	e := newEcho()
	startWorker(t, s.ClientURL(), ids, 2, e.handler(2))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := operator.WaitResult(ctx, op.Conn, "doomed", sentAt)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("dead-lettered after %d deliveries", maxDeliveries)
	if res.OK || res.Agent != 0 || res.ExitStatus != -1 || !strings.Contains(res.Error, want) {
		t.Errorf("result %+v, want a failed one from the bus saying %q", res, want)
	}
	waitEmpty(t, op.Conn)
	if n := streamMsgs(t, op.Conn, wire.DeadStream); n != 1 {
		t.Errorf("DEAD holds %d messages, want 1", n)
	}
	dead, err := js.Stream(ctx, wire.DeadStream)
	if err != nil {
		t.Fatal(err)
	}
	letter, err := dead.GetLastMsgForSubject(ctx, wire.DeadSubject)
	if err != nil {
		t.Fatal(err)
	}
	if h := letter.Header; string(letter.Data) != "poison" || h.Get("X-Job") != "7" || h.Get(wire.TaskIDHeader) != "doomed" ||
		h.Get(wire.TaskSubjectHeader) != wire.RoleTasks("worker") || h.Get(wire.DeliveriesHeader) != strconv.Itoa(maxDeliveries) {
		t.Errorf("dead letter %q, headers %v", letter.Data, h)
	}
	// flockctl events reads it from the journal as a record, written
	// once the task has left TASKS.
	waitForWithin(t, 10*time.Second, "the dead-letter record", func() bool { return len(rec.of(events.DeadLettered)) > 0 })
	if r := rec.of(events.DeadLettered); len(r) != 1 || r[0].Agent != 0 || r[0].Extra["TASK_ID"] != "doomed" ||
		r[0].Detail != "task doomed (tasks.worker) dead-lettered after 3 deliveries" {
		t.Errorf("dead-letter records %+v, want one of task doomed", r)
	}
	if r := stored(t, op.Conn)["doomed"]; len(r) != 1 || len(e.ranBy("doomed")) != 0 {
		t.Errorf("%d stored results, want 1: %+v; run again by %v", len(r), r, e.ranBy("doomed"))
	}
	entries, err := operator.ListTasks(ctx, op.Conn, 10)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range entries {
		states = append(states, string(e.State)+" "+e.ID+" "+e.Subject+" "+strconv.FormatUint(e.Deliveries, 10))
	}
	if !slices.Equal(states, []string{"done doomed tasks.worker 0", "dead doomed tasks.worker 3"}) {
		t.Errorf("flockctl tasks would list %q", states)
	}
}

// TestBusRestartKeepsTasks: the bus stops while tasks are queued and one
// is running, and starts again on the same store and port: no task is
// lost, the workers reconnect by themselves and finish every one, each
// with one stored result.
//
// Tier: unit (no root).
func TestBusRestartKeepsTasks(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	dir := t.TempDir()
	// A port this test alone listens on (freePorts): no other test's
	// server or client takes it while the bus is down.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(t, 1)[0]))
	listen := func(c *Config) { c.Listen = addr }
	s := taskBus(t, ids, Options{StoreDir: dir}, listen)
	url := s.ClientURL()
	op := connect(t, s, ids, creds.OperatorName)
	e := newEcho()
	slow := func(id int) agent.Handler {
		return func(ctx context.Context, task agent.Task) wire.Result {
			time.Sleep(100 * time.Millisecond)
			return e.handler(id)(ctx, task)
		}
	}
	startWorker(t, url, ids, 2, slow(2))
	startWorker(t, url, ids, 4, slow(4))
	tasks := taskIDs("r", 30)
	for _, id := range tasks {
		send(t, op.Conn, wire.RoleTasks("worker"), id, id)
	}
	waitForWithin(t, 10*time.Second, "a few results", func() bool { return len(stored(t, op.Conn)) >= 4 })

	s.Shutdown()
	s2 := taskBus(t, ids, Options{StoreDir: dir}, listen)
	op2 := connect(t, s2, ids, creds.OperatorName)
	got := waitResults(t, op2.Conn, 30*time.Second, tasks...)
	waitEmpty(t, op2.Conn)
	for _, id := range tasks {
		if len(got[id]) != 1 || got[id][0].Output != id {
			t.Errorf("task %s: stored results %+v", id, got[id])
		}
	}
	reruns := 0
	for _, id := range tasks {
		reruns += len(e.ranBy(id)) - 1
	}
	t.Logf("30 tasks across a bus restart: %d ran twice (in hand when the bus went; one result stored each)", reruns)
}

// TestReloadConsumers: a reload gives a new worker its consumer, deletes a
// removed worker's, and applies a new max_deliveries to every consumer;
// consumers the bus did not make are left alone.
//
// Tier: unit (no root).
func TestReloadConsumers(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	f := twoWorkers()
	s := startBus(t, ForFlock(f, ids.keys("flock-4")), Options{})
	op := connect(t, s, ids, creds.OperatorName)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, wire.TasksStream, jetstream.ConsumerConfig{Durable: "operators-own", FilterSubject: "tasks.batch", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	consumers := func() map[string]int {
		t.Helper()
		tasks, err := js.Stream(ctx, wire.TasksStream)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		infos := tasks.ListConsumers(ctx)
		for ci := range infos.Info() {
			out[ci.Name] = ci.Config.MaxDeliver
		}
		if err := infos.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, step := range []struct {
		name string
		c    Config
		want map[string]int
	}{
		{"started without agent 4", ForFlock(f, ids.keys("flock-4")), map[string]int{"worker": 5, "agent-2": 5, "operators-own": -1}},
		{"agent 4 added", ForFlock(f, ids.keys()), map[string]int{"worker": 5, "agent-2": 5, "agent-4": 5, "operators-own": -1}},
		{"agent 2 removed, max_deliveries 7", func() Config {
			c := ForFlock(f, ids.keys("flock-2"))
			c.Tasks.MaxDeliveries = 7
			return c
		}(), map[string]int{"worker": 7, "agent-4": 7, "operators-own": -1}},
	} {
		if err := s.Reload(step.c); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := consumers(); !maps.Equal(got, step.want) {
			t.Errorf("%s: consumers %v, want %v", step.name, got, step.want)
		}
	}
}

// TestStoreMaxShrinks: the bus starts again on its store after store_max
// was lowered below what its streams were made for (JetStream refuses to
// change streams that reserve more than the server's bound), keeps what
// was queued, and bounds its streams by the new store_max.
//
// Tier: unit (no root).
func TestStoreMaxShrinks(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	dir := t.TempDir()
	s := taskBus(t, ids, Options{StoreDir: dir}, func(c *Config) { c.Tasks.StoreMax = 2 << 30 })
	send(t, connect(t, s, ids, creds.OperatorName).Conn, wire.RoleTasks("worker"), "queued", "x")
	s.Shutdown()
	for range 2 { // lowered, then started again as it is
		s = taskBus(t, ids, Options{StoreDir: dir}, func(c *Config) { c.Tasks.StoreMax = 128 << 20 })
		op := connect(t, s, ids, creds.OperatorName)
		if n := streamMsgs(t, op.Conn, wire.TasksStream); n != 1 {
			t.Errorf("TASKS holds %d tasks, want the one queued", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		js, err := jetstream.New(op.Conn)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for si := range js.ListStreams(ctx).Info() {
			total += si.Config.MaxBytes
		}
		cancel()
		if total > 128<<20 {
			t.Errorf("the streams may hold %d bytes, more than store_max", total)
		}
		s.Shutdown()
	}
}
