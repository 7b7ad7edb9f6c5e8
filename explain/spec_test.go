package explain

// Tier: unit (a spec, no host).

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
)

// The spec form names the walls a level cannot close on the kernel:
// abstract sockets at process and podman without Landlock scopes, none at
// gvisor, none with scopes.
func TestWriteSpecPrintsGaps(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n  - id: 2\n    level: podman\n    rootfs: /var/lib/flock-rootfs/debian\n" +
		"  - id: 3\n    level: gvisor\n    rootfs: /var/lib/flock-rootfs/debian\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kernel{KernelFacts("6.1.0", 3), KernelFacts("6.12.0", 6)} {
		var out bytes.Buffer
		WriteSpec(&out, f, "", k)
		for _, level := range []string{"process", "podman", "gvisor"} {
			line := "# OPEN at level " + level + " on this host: abstract UNIX sockets: the agent shares the host's network namespace"
			if want := !k.IPCScopes && level != "gvisor"; bytes.Contains(out.Bytes(), []byte(line)) != want {
				t.Errorf("kernel %s, level %s: gap printed %v, want %v:\n%s", k.Release, level, !want, want, out.String())
			}
		}
	}
}

// The spec form names a grant's dollar limits and the budgets an agent's
// model requests must also fit.
func TestWriteSpecNamesMoneyLimitsAndBudgets(t *testing.T) {
	f, err := spec.Parse([]byte(`providers: [{name: anthropic, kind: anthropic, url: "https://api.anthropic.com"}]
agents:
  - {id: 1, role: orchestrator, models: {anthropic: {usd_per_day: 5.5}}}
  - {id: 2, models: {anthropic: {}}, task_budget: {usd: 0.5, tokens: 200K}}
budgets:
  - {name: workers, roles: [worker], usd_per_day: 20, tokens_per_month: 500M}
  - {name: flock, agents: all, usd_per_month: 400}
`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteSpec(&out, f, "", KernelFacts("6.12.0", 6))
	for _, want := range []string{"limits: usd_per_day 5.5;",
		"#   budgets, shared with their other agents: flock (usd_per_month 400)\n",
		"#   budgets, shared with their other agents: workers (tokens_per_month 500000000, usd_per_day 20); flock (usd_per_month 400)\n",
		"#   each task it takes may spend at most $0.50 and 200000 tokens (task_budget; a task sent with a smaller budget of its own is held to that)\n"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the spec form lacks %q:\n%s", want, out.String())
		}
	}
}

// The spec form's JSON is a stable shape: testdata/spec.json (go test
// ./explain -run SpecJSON -update rewrites it). An orchestrator on one
// host with names and a model grant, a worker with a JIT, a task budget
// and a budget on the other, on a kernel without Landlock's IPC scopes.
func TestSpecJSON(t *testing.T) {
	f, err := spec.Parse([]byte(`providers: [{name: anthropic, kind: anthropic, url: "https://api.anthropic.com"}]
hosts: [{name: a, address: 10.77.0.11}, {name: b, address: "fd00::12"}]
agents:
  - {id: 1, host: a, role: orchestrator, egress: ["api.example.com:443", "10.1.2.0/24:443"], models: {anthropic: {usd_per_day: 5.5}}}
  - {id: 2, host: b, jit: true, models: {anthropic: {}}, task_budget: {usd: 0.5, tokens: 200K}}
budgets:
  - {name: workers, roles: [worker], usd_per_day: 20}
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(Spec(f, "", KernelFacts("6.1.0", 3)), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/spec.json", string(b)+"\n")
	if got := Spec(f, "2", KernelFacts("6.1.0", 3)); len(got) != 1 || got[0].Agent != 2 || !got[0].JIT || got[0].Host.Name != "b" {
		t.Errorf("agent 2 alone: %+v", got)
	}
}
