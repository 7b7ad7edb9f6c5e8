package main

// Tier: unit (no root): status's exit code from the rows it printed, and
// the agents it is asked about.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/status"
	"github.com/flockrun/flock/units"
)

func TestStatusExit(t *testing.T) {
	well := func(id int) status.Agent {
		return status.Agent{ID: id, State: "active", SubState: "running", Bus: "connected"}
	}
	with := func(a status.Agent, edit func(*status.Agent)) status.Agent { edit(&a); return a }
	for _, tc := range []struct {
		name string
		r    status.Report
		want exitCode
	}{
		{"all well", status.Report{Rows: []status.Agent{well(1), well(2)}}, exitOK},
		{"no agent asked", status.Report{}, exitOK},
		{"one failed", status.Report{Rows: []status.Agent{well(1), with(well(2), func(a *status.Agent) { a.State = "failed" })}}, exitUnhealthy},
		{"one restarting", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.State, a.SubState = "activating", "auto-restart" })}}, exitUnhealthy},
		{"one stopped", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.State = "inactive" })}}, exitUnhealthy},
		{"one not connected", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.Bus = "disconnected" })}}, exitUnhealthy},
		{"one drifted", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.Drift = "start: unit changed" })}}, exitUnhealthy},
		{"the flock drifted", status.Report{Rows: []status.Agent{well(1)}, FlockWide: []string{"firewall table inet flock: absent"}}, exitUnhealthy},
		{"the bus did not answer", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.Bus = "unknown" })}, BusErr: errors.New("no servers")}, exitUnreachable},
		{"the bus did not answer, an agent failed", status.Report{Rows: []status.Agent{with(well(1), func(a *status.Agent) { a.State, a.Bus = "failed", "unknown" })}, BusErr: errors.New("no servers")}, exitUnreachable},
	} {
		if got := statusExit(tc.r); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}

// An unreadable flock is said and exits 4; a code of status's own is not
// said (the table said it).
func TestUnreachableIsSaid(t *testing.T) {
	err := unreachable(fmt.Errorf("%w: PID 1 is \"init\"", units.ErrNoSystemd))
	if code, say := exitFor(err); code != exitUnreachable || !say || !errors.Is(err, units.ErrNoSystemd) {
		t.Errorf("unreachable: exit %d, say %v", code, say)
	}
	if code, say := exitFor(exitUnhealthy); code != exitUnhealthy || say {
		t.Errorf("unhealthy: exit %d, say %v", code, say)
	}
}

func TestAskedAgents(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n  - id: 2\n  - id: 3\n  - id: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []int
		err  string
	}{
		{nil, nil, ""},
		{[]string{"2"}, []int{2}, ""},
		{[]string{"7", "1", "7"}, []int{7, 1}, ""},
		{[]string{"99"}, nil, "agent 99 is not in the provisioned flock: its agents are 1-3, 7"},
		{[]string{"2", "4"}, nil, "agent 4 is not in the provisioned flock"},
		{[]string{"two"}, nil, `agent "two": an id is a positive number, as in the spec (the provisioned flock has agents 1-3, 7)`},
		{[]string{"0"}, nil, `agent "0": an id is a positive number`},
	} {
		got, err := askedAgents(f, tc.args, "the provisioned flock")
		switch {
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%v: %v, %v; want %v", tc.args, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.err)
		}
	}
}

// status of an agent not in the flock fails before it reads the host,
// printing nothing.
func TestStatusArgs(t *testing.T) {
	file := writeSpec(t, "agents: [{id: 1}, {id: 2}]\n")
	for _, tc := range []struct {
		args []string
		code exitCode
		err  string
	}{
		{[]string{"status", "-f", file, "3"}, exitError, "agent 3 is not in " + file + ": its agents are 1-2"},
		{[]string{"status", "-f", file, "x"}, exitError, `agent "x": an id is a positive number`},
	} {
		out, err := runRoot(t, tc.args...)
		if code, _ := exitFor(err); code != tc.code || err == nil || !strings.Contains(err.Error(), tc.err) || out != "" {
			t.Errorf("%v: exit %d, %v, printed %q; want exit %d and %q", tc.args, code, err, out, tc.code, tc.err)
		}
	}
}
