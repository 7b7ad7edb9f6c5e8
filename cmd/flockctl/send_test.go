package main

import (
	"bytes"
	"encoding/json"
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

// Tier: unit. --budget-usd and --budget-tokens read the task's budget;
// a bad value is refused by the flag's parsing, before send reads the
// flock or the bus, naming the flag and the fix.
func TestSendBudgetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want wire.TaskBudget
		err  string
	}{
		{[]string{"--budget-usd", "0.50"}, wire.TaskBudget{USD: wire.USD / 2}, ""},
		{[]string{"--budget-usd=2", "--budget-tokens", "200000"}, wire.TaskBudget{Tokens: 200000, USD: 2 * wire.USD}, ""},
		{[]string{"--budget-tokens", "1"}, wire.TaskBudget{Tokens: 1}, ""},
		{nil, wire.TaskBudget{}, ""},
		{[]string{"--budget-usd", "0"}, wire.TaskBudget{}, `"--budget-usd" flag: give an amount of dollars above 0, e.g. --budget-usd 0.50`},
		{[]string{"--budget-usd", "-1"}, wire.TaskBudget{}, `"--budget-usd" flag: give an amount`},
		{[]string{"--budget-usd", "$1"}, wire.TaskBudget{}, `"--budget-usd" flag: give an amount`},
		{[]string{"--budget-usd="}, wire.TaskBudget{}, `"--budget-usd" flag: give an amount`},
		{[]string{"--budget-tokens", "0"}, wire.TaskBudget{}, `"--budget-tokens" flag: give a whole number of tokens above 0, e.g. --budget-tokens 200000`},
		{[]string{"--budget-tokens", "-5"}, wire.TaskBudget{}, `"--budget-tokens" flag: give a whole number`},
		{[]string{"--budget-tokens", "200K"}, wire.TaskBudget{}, `"--budget-tokens" flag: give a whole number`},
	} {
		cmd := newSend()
		err := cmd.ParseFlags(tc.args)
		got := *cmd.Flags().Lookup("budget-usd").Value.(budgetFlag).b
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.err)
			}
			out, err := runRoot(t, append(append([]string{"send"}, tc.args...), "a task")...)
			if err == nil || !strings.Contains(err.Error(), tc.err) || out != "" {
				t.Errorf("send %q: %v, printed %q; want only the flag's error", tc.args, err, out)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// Tier: unit. Below a result, text output says on stderr what the task
// cost, and plainly when its budget stopped it; stdout stays the
// command's output, and a result without a spend says nothing of cost.
// JSON output carries the spend whole, as the result has it.
func TestPrintResultSpend(t *testing.T) {
	budget := &wire.TaskBudget{USD: 3 * wire.USD / 10}
	spend := &wire.TaskSpend{Requests: 7, Tokens: wire.Tokens{InputTokens: 30000, OutputTokens: 8000, CacheReadTokens: 3200}, Cost: 38 * wire.USD / 100}
	over := &wire.TaskSpend{Requests: 9, Tokens: wire.Tokens{InputTokens: 52000}, Cost: 3 * wire.USD / 10, Budget: budget, OutOfBudget: true}
	for _, tc := range []struct {
		name   string
		spend  *wire.TaskSpend
		stderr string
	}{
		{"spent", spend, "cost: 41200 tokens, $0.38 in 7 requests\n"},
		{"out of budget", over, "cost: 52000 tokens, $0.30 in 9 requests (out of its budget usd=0.3)\n" +
			"task t-1 ran out of its budget: flock-proxy refused its model requests past it; send it with a larger --budget-usd or --budget-tokens, or raise its worker's task_budget\n"},
		{"no spend", nil, ""},
		{"no request", &wire.TaskSpend{}, ""},
		{"refused at its first request", &wire.TaskSpend{Budget: budget, OutOfBudget: true}, "cost: 0 tokens, $0.00 in 0 requests (out of its budget usd=0.3)\n" +
			"task t-1 ran out of its budget: flock-proxy refused its model requests past it; send it with a larger --budget-usd or --budget-tokens, or raise its worker's task_budget\n"},
	} {
		res := wire.Result{TaskID: "t-1", Agent: 2, OK: true, Output: "done\n", Spend: tc.spend}
		var out, errOut bytes.Buffer
		if err := printResult(stdio{out: &out, errOut: &errOut}, res, "text"); err != nil {
			t.Fatal(err)
		}
		if out.String() != "done\n" || errOut.String() != tc.stderr {
			t.Errorf("%s: stdout %q, stderr %q; want %q, %q", tc.name, out.String(), errOut.String(), "done\n", tc.stderr)
		}

		out.Reset()
		errOut.Reset()
		if err := printResult(stdio{out: &out, errOut: &errOut}, res, "json"); err != nil {
			t.Fatal(err)
		}
		var got wire.Result
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v:\n%s", tc.name, err, out.String())
		}
		if (got.Spend == nil) != (tc.spend == nil) || got.Spend != nil && (got.Spend.Line() != tc.spend.Line() || got.Spend.Tokens != tc.spend.Tokens) {
			t.Errorf("%s: JSON's spend %+v, want %+v:\n%s", tc.name, got.Spend, tc.spend, out.String())
		}
		if errOut.Len() != 0 {
			t.Errorf("%s: JSON output wrote %q on stderr", tc.name, errOut.String())
		}
	}
}
