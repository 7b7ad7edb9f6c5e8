package bus

// Tier: unit (no root). The bus on a store that a power cut, a flipped
// bit or a lost file damaged: it starts, keeps every task and result that
// proves itself, and says what it could not keep (storecheck.go, store).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/store"
	"github.com/flockrun/flock/wire"
)

// streamDir is a stream's directory in the bus's store.
func streamDir(dir, stream string) string {
	return filepath.Join(dir, store.JetStreamDir, "$G", "streams", stream)
}

// damageRecord flips the length of record k (1-based) of a stream's
// first block, as a torn or flipped write would: nats-server cuts the
// block there.
func damageRecord(t *testing.T, dir, stream string, k int) {
	t.Helper()
	p := filepath.Join(streamDir(dir, stream), "msgs", "1.blk")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for range k - 1 {
		off += int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
	}
	b[off+1] ^= 0xff
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// queued are the ids of the tasks in TASKS, in order.
func queued(t *testing.T, s *Server, ids identities) []string {
	t.Helper()
	op := connect(t, s, ids, creds.OperatorName)
	defer op.Close()
	es, err := operator.ListTasks(context.Background(), op.Conn, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.State == operator.Pending || e.State == operator.Running {
			out = append(out, e.ID)
		}
	}
	return out
}

func without(ids []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(drop, id) })
}

// TestDamagedStore: the bus starts on a damaged store, keeps every task
// that proves itself (the server alone would drop those past a bad
// record), and says what it could not keep, in its status and as a
// store-damaged event; a second start finds nothing more and puts nothing
// back twice.
func TestDamagedStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		tasks   []string // queued after the start
		what    string   // the problem's words; "" for none
		putBack int
		aside   bool // a copy of the damaged file is kept
	}{
		{"a record's length flipped", func(t *testing.T, dir string) { damageRecord(t, dir, wire.TasksStream, 4) },
			without(taskIDs("t", 20), "t-3"), "fail their checksums", 16, true},
		{"the last record torn", func(t *testing.T, dir string) {
			p := filepath.Join(streamDir(dir, wire.TasksStream), "msgs", "1.blk")
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-40); err != nil {
				t.Fatal(err)
			}
		}, without(taskIDs("t", 20), "t-19"), "prove nothing; a write cut short when the bus or the machine stopped", 0, false},
		{"the consumer's state unreadable", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(streamDir(dir, wire.TasksStream), "obs", "worker", "o.dat"), []byte("torn"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, taskIDs("t", 20), "its state (o.dat) cannot be decoded", 0, true},
		{"a block file missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(streamDir(dir, wire.TasksStream), "msgs", "1.blk")); err != nil {
				t.Fatal(err)
			}
		}, nil, "a block file the stream's index names is missing: its messages are gone (the server: Filestore [TASKS] ", 0, false},
		{"the index missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(streamDir(dir, wire.TasksStream), "msgs", "index.db")); err != nil {
				t.Fatal(err)
			}
		}, taskIDs("t", 20), "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids := newIdentities(t, everyoneAnd4...)
			dir := t.TempDir()
			c := ForFlock(twoWorkers(), ids.keys())
			s := startBus(t, c, Options{StoreDir: dir})
			op := connect(t, s, ids, creds.OperatorName)
			for _, id := range taskIDs("t", 20) {
				send(t, op.Conn, wire.RoleTasks("worker"), id, "payload of "+id)
			}
			op.Close()
			s.Shutdown()
			tc.damage(t, dir)

			rec := &recWriter{}
			s = startBus(t, c, Options{StoreDir: dir, Events: rec, Log: testLog{t}})
			if got := queued(t, s, ids); !slices.Equal(got, tc.tasks) {
				t.Errorf("queued after the start: %v, want %v", got, tc.tasks)
			}
			st := s.Status().Store
			damaged := rec.of(events.StoreDamaged)
			if tc.what == "" {
				if len(st) > 0 || len(damaged) > 0 {
					t.Errorf("a store that lost nothing: status %+v, events %+v", st, damaged)
				}
				return
			}
			if len(st) != 1 || !strings.Contains(st[0].What, tc.what) || st[0].Stream != wire.TasksStream || st[0].PutBack != tc.putBack || (st[0].Aside != "") != tc.aside {
				t.Fatalf("status store %+v, want one problem of TASKS saying %q, %d put back, kept aside %v", st, tc.what, tc.putBack, tc.aside)
			}
			if len(damaged) != 1 || damaged[0].Extra["STREAM"] != wire.TasksStream || !strings.Contains(damaged[0].Detail, tc.what) || damaged[0].Extra["ASIDE"] != st[0].Aside {
				t.Errorf("store-damaged events %+v", damaged)
			}
			if !tc.aside {
				if _, err := os.Stat(filepath.Join(dir, store.AsideDir)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a copy was kept of a write cut short: %v", err)
				}
				return
			}
			var out salvage
			if b, err := os.ReadFile(filepath.Join(st[0].Aside, store.SalvagedFile)); err != nil || json.Unmarshal(b, &out) != nil || len(out.Streams[wire.TasksStream].PutBack) != tc.putBack {
				t.Errorf("%s: %s (%v)", store.SalvagedFile, b, err)
			}
			// Started again: the store proves itself now, and nothing is
			// put back twice.
			s.Shutdown()
			rec = &recWriter{}
			s = startBus(t, c, Options{StoreDir: dir, Events: rec})
			if got := queued(t, s, ids); !slices.Equal(got, tc.tasks) {
				t.Errorf("queued after a second start: %v, want %v", got, tc.tasks)
			}
			if st, damaged := s.Status().Store, rec.of(events.StoreDamaged); len(st) > 0 || len(damaged) > 0 {
				t.Errorf("the second start found %+v, %+v", st, damaged)
			}
		})
	}
}

// TestDamagedResultsAndQuarantine: results past a bad record are put
// back, and their tasks are not run again; a store the operator set aside
// whole (store.Quarantine) comes back in an empty one: every result, and
// the tasks not done, once each.
func TestDamagedResultsAndQuarantine(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	dir := t.TempDir()
	c := ForFlock(twoWorkers(), ids.keys())
	s := startBus(t, c, Options{StoreDir: dir})
	op := connect(t, s, ids, creds.OperatorName)
	e := newEcho()
	w := startWorker(t, s.ClientURL(), ids, 2, e.handler(2))
	done := taskIDs("d", 10)
	sendEach(t, op.Conn, wire.RoleTasks("worker"), done)
	waitResults(t, op.Conn, 10*time.Second, done...)
	waitEmpty(t, op.Conn)
	w.stop(t)
	pending := taskIDs("p", 5)
	sendEach(t, op.Conn, wire.RoleTasks("worker"), pending)
	op.Close()
	s.Shutdown()

	damageRecord(t, dir, wire.ResultsStream, 3) // d-2's result: no checksum proves it any more
	s = startBus(t, c, Options{StoreDir: dir})
	op = connect(t, s, ids, creds.OperatorName)
	results := stored(t, op.Conn)
	for _, id := range without(done, "d-2") {
		if len(results[id]) != 1 {
			t.Errorf("task %s: %d results after the start, want its one", id, len(results[id]))
		}
	}
	if st := s.Status().Store; len(st) != 1 || st[0].Stream != wire.ResultsStream || st[0].PutBack != 7 {
		t.Errorf("status store %+v, want RESULTS with 7 put back", st)
	}
	if got := queued(t, s, ids); !slices.Equal(got, pending) {
		t.Errorf("queued: %v, want only %v (a task whose result is stored is not queued again)", got, pending)
	}
	op.Close()
	s.Shutdown()

	aside, err := store.Quarantine(dir, store.Stamp(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, store.JetStreamDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the store is still in place: %v", err)
	}
	s = startBus(t, c, Options{StoreDir: dir})
	op = connect(t, s, ids, creds.OperatorName)
	st := s.Status().Store
	if len(st) != 1 || st[0].Stream != "*" || st[0].Aside != aside || st[0].PutBack != 9+5 {
		t.Errorf("status store %+v, want the whole store set aside and 14 put back", st)
	}
	w = startWorker(t, s.ClientURL(), ids, 4, e.handler(4))
	waitResults(t, op.Conn, 10*time.Second, pending...)
	waitEmpty(t, op.Conn)
	results = stored(t, op.Conn)
	for _, id := range append(without(done, "d-2"), pending...) {
		if len(results[id]) != 1 {
			t.Errorf("task %s: %d results, want one", id, len(results[id]))
		}
		if runs := e.ranBy(id); len(runs) != 1 {
			t.Errorf("task %s ran %d times (%v), want once", id, len(runs), runs)
		}
	}
	w.stop(t)
}
