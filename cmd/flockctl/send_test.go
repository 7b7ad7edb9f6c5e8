package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Tier: unit. Who takes a task sent with --to: workers with a command and
// workers whose own program pulls their consumers alike.
func TestTaskTarget(t *testing.T) {
	f, err := spec.Parse([]byte(`agents:
  - id: 1
    role: orchestrator
    exec: ["/usr/bin/node", "orchestrate.js"]
  - id: 2
    exec: ["/usr/bin/node", "agent.js"]
    task_timeout: 5m
  - id: 3
    command: ["/usr/bin/python3", "agent.py"]
  - id: 4
  - id: 5
    role: monitor
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		to, subject, who, err string
		wait                  time.Duration
	}{
		{"2", wire.AgentTasks(2), "agent 2", "", 5*time.Minute + 10*time.Second},
		{"3", wire.AgentTasks(3), "agent 3", "", f.Agents[2].TaskTimeout + 10*time.Second},
		{"worker", wire.RoleTasks("worker"), "any worker (agents 2, 3)", "", 5*time.Minute + 10*time.Second},
		{"1", "", "", "agent 1 takes no tasks (role orchestrator)", 0},
		{"4", "", "", "agent 4 takes no tasks (role worker)", 0},
		{"5", "", "", "agent 5 takes no tasks (role monitor)", 0},
		{"9", "", "", "no agent 9", 0},
		{"boss", "", "", `--to "boss": give worker`, 0},
	} {
		got, err := taskTarget(f, tc.to)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--to %s: %v, want an error with %q", tc.to, err, tc.err)
			}
			continue
		}
		if err != nil || got.subject != tc.subject || got.who != tc.who || got.wait != tc.wait {
			t.Errorf("--to %s: %+v, %v; want subject %s, who %q, wait %s", tc.to, got, err, tc.subject, tc.who, tc.wait)
		}
	}
	none, err := spec.Parse([]byte("agents: [{id: 1}, {id: 2, role: monitor}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := taskTarget(none, "worker"); err == nil || !strings.Contains(err.Error(), "give a worker command: [...] or its own exec: [...]") {
		t.Errorf("--to worker with no task taker: %v", err)
	}
}

// Tier: unit. A thousand workers are named as a few and a count.
func TestTaskTargetNamesAFewOfMany(t *testing.T) {
	f, err := spec.Parse([]byte("defaults: {command: [\"/bin/cat\"]}\nagents: {count: 1000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := taskTarget(f, "worker")
	if want := "any worker (agents 1, 2, 3, 4, 5 and 995 more)"; err != nil || got.who != want {
		t.Errorf("who %q, %v; want %q", got.who, err, want)
	}
}
