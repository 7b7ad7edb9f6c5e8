package bus

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/store"
	"github.com/flockrun/flock/wire"
)

// TestClusterFromOneHost: a's bus alone stores 3 results and queues 20
// tasks; then a joins b and c in a cluster. Without more, the clustered
// server deletes a's streams as orphans (tasks and all). The bus sets
// a's store aside before its server starts and puts every task and
// result into the cluster's streams, each once: copies current on b and
// c, the tasks done by a worker on b; a started again puts nothing twice.
//
// Tier: unit (three buses in one process, loopback).
func TestClusterFromOneHost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("forms a cluster: not with -short")
	}
	tc := prepareTestCluster(t, 3)
	alone := tc.configs[0]
	alone.Cluster = nil
	storeDir := filepath.Join(tc.dirs[0], "store")
	s, err := Start(alone, Options{StoreDir: storeDir, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	op := connect(t, s, tc.ids, creds.OperatorName)
	e := newEcho()
	w := startWorker(t, s.ClientURL(), tc.ids, 5, e.handler(5))
	done := taskIDs("done", 3)
	sendEach(t, op.Conn, wire.AgentTasks(5), done)
	waitResults(t, op.Conn, 20*time.Second, done...)
	w.stop(t)
	queued := taskIDs("queued", 20)
	sendEach(t, op.Conn, wire.RoleTasks("worker"), queued)
	op.Close()
	s.Shutdown()
	if alone, err := store.Unclustered(storeDir); err != nil || !alone {
		t.Fatalf("a's store: unclustered %v, %v", alone, err)
	}

	for i := range 3 {
		tc.start(i)
	}
	tc.waitReady()
	op = connect(t, tc.servers[1], tc.ids, creds.OperatorName)
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, 60*time.Second, "the 20 tasks and 3 results in the cluster's streams, every copy current", func() bool {
		for name, n := range map[string]uint64{wire.TasksStream: 20, wire.ResultsStream: 3} {
			info := streamInfo(t, js, name)
			if info.State.Msgs != n || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
				return false
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current {
					return false
				}
			}
		}
		return true
	})
	// The tree set aside is marked once all of it is back (putBack): a
	// moment after the streams have the last of it.
	var asides []string
	if !holdsWithin(10*time.Second, func() bool {
		asides, _ = filepath.Glob(filepath.Join(storeDir, store.AsideDir, "*", store.SalvagedFile))
		return len(asides) == 1
	}) {
		t.Errorf("a's store set aside and marked put back: %v", asides)
	}
	// The tasks run once each, by a worker on b.
	startWorker(t, tc.servers[1].ClientURL(), tc.ids, 2, e.handler(2))
	got := waitResults(t, op.Conn, 60*time.Second, append(queued, done...)...)
	for _, id := range append(queued, done...) {
		if len(got[id]) != 1 {
			t.Errorf("task %s: %d results", id, len(got[id]))
		}
	}
	// a again: the store set aside is not put back twice.
	tc.servers[0].Shutdown()
	tc.start(0)
	tc.waitReady()
	time.Sleep(2 * time.Second)
	if n := streamMsgs(t, op.Conn, wire.ResultsStream); n != uint64(len(queued)+len(done)) {
		t.Errorf("after a's restart RESULTS holds %d, want %d", n, len(queued)+len(done))
	}
	if n := streamMsgs(t, op.Conn, wire.TasksStream); n != 0 {
		t.Errorf("after a's restart TASKS holds %d, want 0", n)
	}
	if _, err := os.Stat(filepath.Join(storeDir, store.JetStreamDir, "$SYS", "_js_", "_meta_")); err != nil {
		t.Errorf("a's store is not a cluster's: %v", err)
	}
}
