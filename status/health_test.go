package status

// Tier: unit (no root): whether a row is well, from the fields the table
// prints; and a report of the agents asked about only.

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/plan/plantest"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

func TestProblem(t *testing.T) {
	well := Agent{ID: 2, State: "active", SubState: "running", Bus: "connected"}
	for _, tc := range []struct {
		name string
		edit func(*Agent)
		want string // in the problem; "": well
	}{
		{"active, connected, no drift", func(*Agent) {}, ""},
		{"active after restarts", func(a *Agent) { a.Restarts, a.LastExit = 2, "killed by SIGKILL" }, ""},
		{"its proxy active", func(a *Agent) { a.Proxy = "active" }, ""},
		{"failed", func(a *Agent) { a.State, a.SubState = "failed", "failed" }, "agent 2 is failed/failed"},
		{"restarting", func(a *Agent) { a.State, a.SubState = "activating", "auto-restart" }, "agent 2 is activating/auto-restart"},
		{"starting", func(a *Agent) { a.State, a.SubState = "activating", "start" }, "is activating/start"},
		{"stopped", func(a *Agent) { a.State, a.SubState = "inactive", "dead" }, "is inactive/dead"},
		{"not loaded", func(a *Agent) { a.State, a.SubState = "absent", "" }, "is absent/"},
		{"its host did not answer", func(a *Agent) { a.unknown("host b did not answer") }, "is unknown (host b did not answer)"},
		{"not connected", func(a *Agent) { a.Bus = "disconnected" }, "agent 2 is disconnected on the bus"},
		{"the bus did not say", func(a *Agent) { a.Bus = "unknown" }, "is unknown on the bus"},
		{"drifted", func(a *Agent) { a.Drift = "start: unit changed" }, "agent 2 drifted: start: unit changed"},
		{"its proxy down", func(a *Agent) { a.Proxy = "failed" }, "agent 2's proxy is failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := well
			tc.edit(&a)
			got := a.Problem()
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Problem() = %q, want %q", got, tc.want)
			}
		})
	}
	r := Report{Rows: []Agent{well}, FlockWide: []string{"firewall table inet flock: absent"}}
	if got := r.Problems(); len(got) != 1 || got[0] != "drift: firewall table inet flock: absent" {
		t.Errorf("a well agent in a drifted flock: %q", got)
	}
}

// Read of the agents asked about has their rows alone, in the spec's
// order; agent 1, failed, shows only when asked about.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	f, err := spec.Count(4)
	if err != nil {
		t.Fatal(err)
	}
	h, fk := plantest.Provisioned(t, f)
	fk.Units.Fail(spec.UnitName(1))
	d := plan.Build(f, plan.Site{}, units.Options{})
	have, err := plan.Observe(ctx, h, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		only []int
		want []int
	}{
		{nil, []int{1, 2, 3, 4}},
		{[]int{3, 2}, []int{2, 3}},
		{[]int{4}, []int{4}},
	} {
		r := Read(ctx, f, Sources{Host: h, Have: have, Drift: plan.Diff(d, have), Only: tc.only})
		var got []int
		for _, row := range r.Rows {
			got = append(got, row.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("only %v: rows %v, want %v", tc.only, got, tc.want)
		}
	}
}
