package test

// Tier: root + nspawn. A damaged store on a real flock.service: the bus
// starts, keeps the tasks that prove themselves, and status, events,
// tasks and store check all say what happened; store quarantine moves the
// store aside and the tasks stay (docs/design.md, "A torn or corrupted
// store").

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/transcript"
)

// storeSpec: agent 2 takes a task and sits on it, so the rest stay queued.
const storeSpec = `agents:
  - id: 2
    command: ["/bin/sleep", "600"]
`

// tasksBlock is the first block of TASKS in the bus's state directory.
const tasksBlock = "/var/lib/private/flock-bus/jetstream/$G/streams/TASKS/msgs/1.blk"

// TestStoreDamageIsShown flips the length of one task's record in TASKS
// with the bus stopped; started again, the bus keeps the tasks past it
// (the server alone would cut them), and every view names the damage.
func TestStoreDamageIsShown(t *testing.T) {
	m := harness.Boot(t)
	provision(t, m, storeSpec)
	waitActive(t, m, 2)
	var sent []string
	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("t-%d", i)
		mustRun(t, m, "flockctl", "send", "--no-wait", "--id", id, "payload of "+id)
		sent = append(sent, id)
	}
	mustRun(t, m, "systemctl", "stop", "flock.service")
	b, err := m.ReadFile(tasksBlock)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for range 3 { // to the fourth record: t-4
		off += int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
	}
	b[off+1] ^= 0xff
	if err := m.WriteFile(tasksBlock, b, 0o640); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	mustRun(t, m, "systemctl", "start", "flock.service")
	waitActive(t, m, 2)
	// The agent reconnects on its own time: the status the page shows is
	// the one after it did (it read "disconnected" when taken at once).
	waitBus(t, m, before, 2)

	kept := slices.DeleteFunc(slices.Clone(sent), func(id string) bool { return id == "t-4" })
	if got := queuedIDs(t, m); !slices.Equal(got, kept) {
		t.Errorf("flockctl tasks after the start: %v, want %v (t-4's record proves nothing)", got, kept)
	}
	// What the operator reads of it (docs/troubleshooting.md).
	damaged := transcript.New(t, "store-damaged")
	out, err := damaged.Run(m, "flockctl status")
	if err != nil || !strings.Contains(out, "store: TASKS, jetstream/$G/streams/TASKS/msgs/1.blk: ") || !strings.Contains(out, "fail their checksums") ||
		!strings.Contains(out, "6 messages that proved themselves put back; kept in /var/lib/flock-bus/damaged/") {
		t.Errorf("flockctl status does not name the damage and what was put back:\n%s", out)
	}
	evs := eventsOf(t, m, "--since", "10m")
	if n := count(evs, events.StoreDamaged, 0, "6 messages that proved themselves are put back"); n != 1 {
		t.Errorf("%d store-damaged events saying what was put back, want 1:\n%s", n, texts(evs))
	}
	damaged.Run(m, "flockctl events --since 10m | grep store-damaged")
	if out := mustRun(t, m, "journalctl", "-u", "flock.service", "--since", "@"+fmt.Sprint(before.Unix()), "--no-pager", "-o", "cat"); !strings.Contains(out, "store: stream TASKS") {
		t.Errorf("the journal does not name the damage:\n%s", out)
	}
	// The server cut the block; what it holds now proves itself, and the
	// damaged copy is listed as put back.
	out, err = damaged.Run(m, "flockctl store check")
	if err != nil || !strings.Contains(out, "TASKS ") || !strings.Contains(out, ": proves itself") || !strings.Contains(out, "put back by the bus") {
		t.Errorf("flockctl store check after the start: %v\n%s", err, out)
	}

	out, err = damaged.Run(m, "flockctl store quarantine")
	if err != nil || !strings.Contains(out, "moved the store to /var/lib/private/flock-bus/damaged/") || !strings.Contains(out, "9 messages put back") {
		t.Errorf("flockctl store quarantine: %v\n%s", err, out)
	}
	waitActive(t, m, 2)
	if got := queuedIDs(t, m); !slices.Equal(got, kept) {
		t.Errorf("flockctl tasks after the quarantine: %v, want %v", got, kept)
	}
	var check struct {
		Aside []struct {
			PutBack bool `json:"put_back"`
		} `json:"aside"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, m, "flockctl", "store", "check", "--output", "json")), &check); err != nil || len(check.Aside) != 2 || !check.Aside[0].PutBack || !check.Aside[1].PutBack {
		t.Errorf("flockctl store check lists %+v (%v), want two trees set aside, both put back", check.Aside, err)
	}
}

// queuedIDs are the ids of the tasks flockctl tasks lists as pending or
// running, sorted as sent (t-1, t-2, ... t-10).
func queuedIDs(t *testing.T, m runner) []string {
	t.Helper()
	var es []operator.TaskEntry
	if err := json.Unmarshal([]byte(mustRun(t, m, "flockctl", "tasks", "--output", "json")), &es); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		if e.State == operator.Pending || e.State == operator.Running {
			ids = append(ids, e.ID)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		var x, y int
		fmt.Sscanf(a, "t-%d", &x)
		fmt.Sscanf(b, "t-%d", &y)
		return x - y
	})
	return ids
}
