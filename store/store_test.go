package store

// Tier: unit (no root). A real nats-server (the library, in this
// process) writes a store in a temporary directory; the tests damage its
// files as a torn write, flipped bits or a lost file would, and read it
// back as the server would not.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const testStream = "TASKS"

// writeStore runs nats-server on dir with a work-queue stream of n
// messages t-1..t-n (headers and a body each) and a durable consumer that
// has taken and acknowledged the first acked of them, then stops it.
func writeStore(t *testing.T, dir string, n, acked int) {
	t.Helper()
	ns, js := serve(t, dir)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: testStream, Subjects: []string{"tasks.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		m := nats.NewMsg("tasks.worker")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("t-%d", i))
		m.Header.Set("Flock-Task-Id", fmt.Sprintf("t-%d", i))
		m.Data = []byte(strings.Repeat(fmt.Sprintf("payload %d ", i), 10))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if acked > 0 {
		batch, err := c.Fetch(acked, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != acked {
			t.Fatalf("acknowledged %d, want %d", got, acked)
		}
	}
	ns.Shutdown()
	ns.WaitForShutdown()
}

// serve starts nats-server with JetStream on dir, stopped when the test
// ends (again: Shutdown twice is fine).
func serve(t *testing.T, dir string) (*server.Server, jetstream.JetStream) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return ns, js
}

// served is what the server holds of the stream after a start on dir.
func served(t *testing.T, dir string) []string {
	t.Helper()
	ns, js := serve(t, dir)
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	ctx := context.Background()
	s, err := js.Stream(ctx, testStream)
	if err != nil {
		t.Fatalf("the server lost stream %s: %v", testStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Header.Get("Flock-Task-Id"))
	}
	return ids
}

func blockPath(dir string) string { return filepath.Join(streamsDir(dir), testStream, "msgs", "1.blk") }

func ids(msgs []Msg) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Header.Get("Flock-Task-Id"))
	}
	return out
}

func taskIDs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("t-%d", i))
	}
	return out
}

// recordStart is where record k (1-based) of the block starts.
func recordStart(t *testing.T, dir string, k int) int {
	t.Helper()
	buf, err := os.ReadFile(blockPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	recs, bad := scanBlock(buf, blockHash(testStream, 1))
	if len(bad) > 0 || len(recs) < k {
		t.Fatalf("the block has %d records and bad spans %v", len(recs), bad)
	}
	return recs[k-1].off
}

// TestCheckReadsAStoreTheServerWrote: a store as nats-server left it
// proves itself whole: the messages, the deletions its consumer's
// acknowledgements made, the consumer's state.
func TestCheckReadsAStoreTheServerWrote(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 20, 5)
	r, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || len(r.Streams) != 1 {
		t.Fatalf("a sound store: %+v", r)
	}
	s := r.Streams[0]
	if s.Name != testStream || s.Records != 20 || s.Tombstones != 5 || !slices.Equal(s.Consumers, []string{"worker"}) || len(s.Notes) > 0 {
		t.Errorf("stream %+v, want 20 records, 5 tombstones, consumer worker", s)
	}
	msgs, err := Read(dir, testStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(msgs); !slices.Equal(got, taskIDs(6, 20)) {
		t.Errorf("Read: %v, want t-6..t-20 (t-1..5 were acknowledged, so deleted)", got)
	}
	if m := msgs[0]; m.Subject != "tasks.worker" || m.Seq != 6 || !strings.HasPrefix(string(m.Data), "payload 6 ") || m.Header.Get("Nats-Msg-Id") != "t-6" {
		t.Errorf("the first message read: %+v", m)
	}
	if empty, err := Check(filepath.Join(dir, "none")); err != nil || empty.Damaged() || len(empty.Streams) != 0 {
		t.Errorf("a store not made yet: %+v, %v", empty, err)
	}
}

// TestDamage: each kind of damage is found, named with its file and what
// it costs, given the action that keeps it; Read keeps every message
// that proves itself, where the server keeps fewer.
func TestDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		what   string   // in the problem's words
		action Action   // what the bus does with the file
		kept   int      // records past the damage that prove themselves
		read   []string // what Read keeps
		server []string // what the server keeps of the same
	}{
		{"a torn last record", func(t *testing.T, dir string) {
			st, _ := os.Stat(blockPath(dir))
			if err := os.Truncate(blockPath(dir), st.Size()-50); err != nil {
				t.Fatal(err)
			}
		}, "the block ends in a torn record", None, 0, taskIDs(1, 19), taskIDs(1, 19)},
		// The server cuts the block at a record whose length is wrong,
		// and drops the 16 good ones after it.
		{"flipped bits in a record's length", func(t *testing.T, dir string) {
			flip(t, blockPath(dir), recordStart(t, dir, 4)+1, 1)
		}, "fail their checksums (1 damaged spans)", Copy, 16, append(taskIDs(1, 3), taskIDs(5, 20)...), taskIDs(1, 3)},
		// A record's body: the server loses that one message.
		{"flipped bits in a record's body", func(t *testing.T, dir string) {
			flip(t, blockPath(dir), recordStart(t, dir, 4)+60, 8)
		}, "fail their checksums (1 damaged spans)", Copy, 16, append(taskIDs(1, 3), taskIDs(5, 20)...), append(taskIDs(1, 3), taskIDs(5, 20)...)},
		{"a zeroed page", func(t *testing.T, dir string) {
			zero(t, blockPath(dir), recordStart(t, dir, 8)+3, 300)
		}, "fail their checksums", Copy, 0, nil, taskIDs(1, 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeStore(t, dir, 20, 0)
			tc.damage(t, dir)
			r, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			ps := r.Problems()
			if len(ps) != 1 || !strings.Contains(ps[0].What, tc.what) || ps[0].Action != tc.action || ps[0].File != filepath.Join(JetStreamDir, account, "streams", testStream, "msgs", "1.blk") {
				t.Fatalf("problems %+v, want one saying %q, action %s", ps, tc.what, tc.action)
			}
			if tc.kept > 0 && ps[0].Kept != tc.kept || ps[0].LostBytes == 0 {
				t.Errorf("kept %d, lost %d bytes; want %d kept and some lost", ps[0].Kept, ps[0].LostBytes, tc.kept)
			}
			msgs, err := Read(dir, testStream)
			if err != nil {
				t.Fatal(err)
			}
			if tc.read != nil && !slices.Equal(ids(msgs), tc.read) {
				t.Errorf("Read: %v, want %v", ids(msgs), tc.read)
			}
			// The server, on the same files, keeps what it says here.
			if got := served(t, dir); !slices.Equal(got, tc.server) {
				t.Errorf("the server keeps %v, want %v", got, tc.server)
			}
		})
	}
}

// TestMissingAndUnreadableFiles: what the server rebuilds is a note;
// what keeps it from starting a consumer, or proves nothing, is moved.
func TestMissingAndUnreadableFiles(t *testing.T) {
	sdir := func(dir string) string { return filepath.Join(streamsDir(dir), testStream) }
	for _, tc := range []struct {
		name    string
		damage  func(dir string) error
		what    string // "" for none
		action  Action
		note    string
		starts  bool // the server starts the consumer with the file as it is
		records int  // the server's messages after
	}{
		{"the index is missing", func(dir string) error { return os.Remove(filepath.Join(sdir(dir), "msgs", "index.db")) },
			"", None, "index.db is missing: the server rebuilds it", true, 20},
		{"the consumer's state is garbage", func(dir string) error {
			return os.WriteFile(filepath.Join(sdir(dir), "obs", "worker", "o.dat"), []byte("garbage"), 0o600)
		}, "its state (o.dat) cannot be decoded", Move, "", false, 20},
		{"the consumer's state is cut short in a pending delivery", func(dir string) error {
			return os.WriteFile(filepath.Join(sdir(dir), "obs", "worker", "o.dat"), []byte{22, 2, 0, 0, 1, 1, 1, 2, 1}, 0o600)
		}, "its state (o.dat) cannot be decoded", Move, "", false, 20},
		{"the stream's metadata fails its checksum", func(dir string) error {
			return os.WriteFile(filepath.Join(sdir(dir), "meta.inf"), []byte(`{"name":"TASKS"}`), 0o600)
		}, "meta.inf fails its checksum", Move, "", true, 0},
		{"the stream's metadata is missing", func(dir string) error { return os.Remove(filepath.Join(sdir(dir), "meta.inf")) },
			"meta.inf is missing", None, "", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeStore(t, dir, 20, 3) // the consumer has pending state: three acknowledged
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			r, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			ps := r.Problems()
			switch {
			case tc.what == "" && len(ps) > 0:
				t.Errorf("problems %+v, want none", ps)
			case tc.what != "" && (len(ps) != 1 || !strings.Contains(ps[0].What, tc.what) || ps[0].Action != tc.action):
				t.Errorf("problems %+v, want one saying %q, action %s", ps, tc.what, tc.action)
			}
			if tc.note != "" && (len(r.Streams) != 1 || len(r.Streams[0].Notes) != 1 || !strings.Contains(r.Streams[0].Notes[0], tc.note)) {
				t.Errorf("notes %+v, want %q", r.Streams, tc.note)
			}
			// What the server makes of it, before anything is set aside.
			ns, js := serve(t, dir)
			_, cerr := js.Consumer(context.Background(), testStream, "worker")
			if s, err := js.Stream(context.Background(), testStream); err == nil {
				info, _ := s.Info(context.Background())
				if int(info.State.Msgs) != tc.records-3 && tc.records > 0 {
					t.Errorf("the server holds %d messages, want %d", info.State.Msgs, tc.records-3)
				}
			} else if tc.records > 0 {
				t.Errorf("the server lost the stream: %v", err)
			}
			if (cerr == nil) != tc.starts && tc.records > 0 {
				t.Errorf("the server's consumer: %v; want it started %v", cerr, tc.starts)
			}
			ns.Shutdown()
			ns.WaitForShutdown()
		})
	}
}

// TestSetAside keeps a copy of a block the server will cut and moves a
// consumer it would not start, writes the report beside them, and the
// tree is pending until marked salvaged; Quarantine moves the whole store.
func TestSetAside(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 20, 3)
	flip(t, blockPath(dir), recordStart(t, dir, 10)+25, 4)
	odir := filepath.Join(streamsDir(dir), testStream, "obs", "worker")
	if err := os.WriteFile(filepath.Join(odir, "o.dat"), []byte{22, 2, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(blockPath(dir))
	r, err := Check(dir)
	if err != nil || len(r.Problems()) != 2 {
		t.Fatalf("Check: %+v, %v", r.Problems(), err)
	}
	stamp := Stamp(time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC))
	aside, err := SetAside(dir, r, stamp)
	if err != nil {
		t.Fatal(err)
	}
	if aside != filepath.Join(dir, AsideDir, "20261127T080000.000Z") {
		t.Errorf("set aside in %s", aside)
	}
	if copied, err := os.ReadFile(blockPath(aside)); err != nil || string(copied) != string(before) {
		t.Errorf("the damaged block's copy: %d bytes, %v; want the %d bytes it had", len(copied), err, len(before))
	}
	if _, err := os.Stat(filepath.Join(streamsDir(aside), testStream, "meta.inf")); err != nil {
		t.Errorf("the stream's metadata is not beside its block: %v", err)
	}
	if _, err := os.Stat(odir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the consumer is still in the store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(streamsDir(aside), testStream, "obs", "worker", "o.dat")); err != nil {
		t.Errorf("the consumer was not moved aside: %v", err)
	}
	var saved Report
	if b, err := os.ReadFile(filepath.Join(aside, ReportFile)); err != nil || json.Unmarshal(b, &saved) != nil || len(saved.Problems()) != 2 {
		t.Errorf("report.json: %s (%v)", b, err)
	}
	// The messages past the damage are read from the copy.
	msgs, err := Read(aside, testStream)
	if err != nil || !slices.Equal(ids(msgs), append(taskIDs(4, 9), taskIDs(11, 20)...)) {
		t.Errorf("Read of the copy: %v, %v", ids(msgs), err)
	}
	if p, err := Pending(dir); err != nil || !slices.Equal(p, []string{aside}) {
		t.Errorf("Pending: %v, %v", p, err)
	}
	if err := MarkSalvaged(aside, map[string]int{"tasks": 16}); err != nil {
		t.Fatal(err)
	}
	if p, err := Pending(dir); err != nil || len(p) != 0 {
		t.Errorf("Pending after MarkSalvaged: %v, %v", p, err)
	}
	if again, err := SetAside(dir, Report{Dir: dir}, Stamp(time.Now())); err != nil || again != "" {
		t.Errorf("nothing damaged set aside %q, %v", again, err)
	}

	q, err := Quarantine(dir, Stamp(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, JetStreamDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the store is still there after Quarantine: %v", err)
	}
	if msgs, err := Read(q, testStream); err != nil || len(msgs) != 16 {
		t.Errorf("Read of the quarantined store: %d messages, %v; want 16", len(msgs), err)
	}
	if p, err := Pending(dir); err != nil || !slices.Equal(p, []string{q}) {
		t.Errorf("Pending after Quarantine: %v, %v", p, err)
	}
}

// TestConsumerState: states the server wrote decode; cut or garbled ones
// fail where the server's decoder fails, and not elsewhere.
func TestConsumerState(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 5, 2)
	good, err := os.ReadFile(filepath.Join(streamsDir(dir), testStream, "obs", "worker", "o.dat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		ok   bool
	}{
		{"as written", good, true},
		{"nothing delivered", []byte{22, 2, 0, 0, 0, 0}, true},
		{"no pending count (read as none)", []byte{22, 2, 1, 1, 1, 1}, true},
		{"one pending", []byte{22, 2, 0, 0, 1, 1, 1, 2, 1, 0, 0}, true},
		{"empty", nil, false},
		{"another magic", []byte{21, 2, 0, 0, 0, 0}, false},
		{"version 3", []byte{22, 3, 0, 0, 0, 0}, false},
		{"cut in its sequences", []byte{22, 2, 0, 0}, false},
		{"cut in a pending delivery", []byte{22, 2, 0, 0, 1, 1, 1, 2, 1}, false},
		{"a pending delivery of sequence 0", []byte{22, 2, 0, 0, 1, 1, 1, 2, 0, 0, 0}, false},
	} {
		if err := consumerState(tc.buf); (err == nil) != tc.ok {
			t.Errorf("%s (% x): %v, want ok %v", tc.name, tc.buf, err, tc.ok)
		}
	}
}

func flip(t *testing.T, path string, at, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := at; i < at+n; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func zero(t *testing.T, path string, at, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[at:min(at+n, len(b))])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUnclustered: a store with streams and no cluster metadata was made
// by a bus alone; an empty one, or a cluster's, was not. Tier: unit.
func TestUnclustered(t *testing.T) {
	dir := t.TempDir()
	check := func(want bool) {
		t.Helper()
		if got, err := Unclustered(dir); err != nil || got != want {
			t.Errorf("Unclustered: %v, %v; want %v", got, err, want)
		}
	}
	check(false)
	if err := os.MkdirAll(filepath.Join(dir, JetStreamDir, account, "streams", "TASKS"), 0o700); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := os.MkdirAll(filepath.Join(dir, JetStreamDir, "$SYS", "_js_", "_meta_"), 0o700); err != nil {
		t.Fatal(err)
	}
	check(false)
}
