package status

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// tableRows are rows as status makes them: connected, disconnected with
// drift, a restart loop, and an absent unit.
func tableRows() []Agent {
	age := func(s float64) *float64 { return &s }
	return []Agent{
		{ID: 1, User: "flock-1", UID: 61001, Unit: "flock-agent@1.service", State: "active", SubState: "running", Role: "orchestrator",
			Level: "strict", Label: "systemd", Bus: "connected", HeartbeatAgeS: age(3.2)},
		{ID: 2, User: "flock-2", UID: 61002, Unit: "flock-agent@2.service", State: "active", SubState: "running", Role: "worker",
			Level: "strict", Label: "systemd", Bus: "disconnected", Violations: 2, Drift: "unit: properties differ"},
		{ID: 3, User: "flock-3", UID: 61003, Unit: "flock-agent@3.service", State: "failed", SubState: "failed", Restarts: 5, Role: "worker",
			Level: "contained", Label: "gvisor", Bus: "disconnected"},
		{ID: 4, User: "flock-4", UID: 61004, Unit: "flock-agent@4.service", State: "absent", Role: "monitor",
			Level: "strict", Label: "systemd", Bus: "unknown"},
	}
}

// Tier: unit. The status table of a flock on one host: no HOST column,
// as before flocks spanned hosts.
func TestStatusTableOneHost(t *testing.T) {
	var b strings.Builder
	printTable(&b, tableRows(), false)
	golden.Check(t, filepath.Join("testdata", "status-one-host.golden"), b.String())
}

// taskRows are tasks as operator.ListTasks lists them (with their spend
// as operator.AddSpend adds it): running held, with its spend so far,
// running waiting to be handed out again, pending, done by an agent (one
// within its budget, one out of it) and by the bus, dead.
func taskRows() []operator.TaskEntry {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	yes, no := true, false
	budget := &wire.TaskBudget{USD: 3 * wire.USD / 10}
	return []operator.TaskEntry{
		{ID: "t-1", State: operator.Running, Subject: "tasks.worker", Holder: 2, Time: at,
			Spend: &wire.TaskSpend{Requests: 2, Tokens: wire.Tokens{InputTokens: 900, OutputTokens: 300}, Cost: wire.USD / 100}},
		{ID: "t-2", State: operator.Running, Subject: "tasks.agent.3", Agent: 3, Time: at},
		{ID: "t-3", State: operator.Pending, Subject: "tasks.worker", Time: at.Add(time.Second)},
		{ID: "t-4", State: operator.Done, Subject: "tasks.worker", Agent: 3, OK: &yes, Time: at.Add(-time.Minute),
			Spend: &wire.TaskSpend{Requests: 7, Tokens: wire.Tokens{InputTokens: 30000, OutputTokens: 8000, CacheReadTokens: 3200}, Cost: 38 * wire.USD / 100}},
		{ID: "t-5", State: operator.Done, Subject: "tasks.worker", OK: &no, Error: "no worker", Time: at.Add(-time.Minute)},
		{ID: "t-6", State: operator.Dead, Subject: "tasks.worker", Deliveries: 3, Time: at.Add(-time.Hour)},
		{ID: "t-7", State: operator.Done, Subject: "tasks.worker", Agent: 2, OK: &no, Error: "exit status 1", Time: at.Add(-2 * time.Minute),
			Spend: &wire.TaskSpend{Requests: 9, Tokens: wire.Tokens{InputTokens: 52000, OutputTokens: 11000}, Cost: 3 * wire.USD / 10, Budget: budget, OutOfBudget: true}},
	}
}

// taskNow is when taskRows are listed.
var taskNow = time.Date(2026, 11, 27, 10, 0, 30, 0, time.UTC)

// Tier: unit. The tasks table of a flock on one host: no HOST column,
// as before flocks spanned hosts.
func TestTasksTableOneHost(t *testing.T) {
	var b strings.Builder
	WriteTasks(&b, taskRows(), taskNow, nil)
	golden.Check(t, filepath.Join("testdata", "tasks-one-host.golden"), b.String())
}

// Tier: unit. The tasks table of a flock on three hosts: the host of the
// agent holding the task, else of the one it is addressed to or that
// stored its result; "-" for a pending task and one the bus ended.
func TestTasksTableHosts(t *testing.T) {
	placed := &Placement{self: "a", of: map[int]string{1: "a", 2: "b", 3: "c"}, hosts: []string{"a", "b", "c"}}
	var b strings.Builder
	WriteTasks(&b, taskRows(), taskNow, placed)
	golden.Check(t, filepath.Join("testdata", "tasks-hosts.golden"), b.String())
	data, err := json.Marshal(withHosts(taskRows()[:3], placed))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"t-1","state":"running","subject":"tasks.worker","holder":2,"time":"2026-11-27T10:00:00Z","spend":{"requests":2,`,
		`"cost_usd":0.01},"host":"b"}`,
		`"agent":3,"time":"2026-11-27T10:00:00Z","host":"c"}`, `"id":"t-3","state":"pending","subject":"tasks.worker","time":"2026-11-27T10:00:01Z"}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON %s lacks %s", data, want)
		}
	}
}

// Tier: unit. Below the tasks table: the hosts whose desks did not say
// what their workers hold.
func TestPrintSilent(t *testing.T) {
	var b strings.Builder
	WriteSilent(&b, []string{"b", "c"}, map[string]wire.HostUnits{"b": {Host: "b"}}, nil)
	WriteSilent(&b, []string{"b"}, nil, errors.New("no bus answers flock.bus.units"))
	want := "note: host c did not answer: the tasks its workers hold show no holder\n" +
		"note: host b could not be asked: no bus answers flock.bus.units: the tasks its workers hold show no holder\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Tier: unit. The tasks as JSON carry each known spend whole, exact
// dollars and the budget that stopped a task; a task without one has no
// spend key.
func TestTasksJSONSpend(t *testing.T) {
	var b strings.Builder
	if err := WriteTasksJSON(&b, taskRows(), nil); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID    string          `json:"id"`
		Spend *wire.TaskSpend `json:"spend"`
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	spends := map[string]*wire.TaskSpend{}
	for _, e := range got {
		spends[e.ID] = e.Spend
	}
	for _, e := range taskRows() {
		g, w := spends[e.ID], e.Spend
		if (g == nil) != (w == nil) || g != nil && (g.Requests != w.Requests || g.Tokens != w.Tokens || g.Cost != w.Cost || g.OutOfBudget != w.OutOfBudget) {
			t.Errorf("task %s: spend %+v in JSON, want %+v", e.ID, g, w)
		}
	}
	for _, want := range []string{`"cost_usd": 0.38`, `"out_of_budget": true`, `"budget": {
        "usd": 0.3
      }`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b.String())
		}
	}
}
