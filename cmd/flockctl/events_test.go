package main

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

// TestEventOptions: good flags make the options; a bad one is refused
// naming the flag and the fix. Tier: unit (no root).
func TestEventOptions(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since, output string
		agent         int
		want          time.Time
		err           string
	}{
		{"1h", "text", 0, now.Add(-time.Hour), ""},
		{"90s", "json", 3, now.Add(-90 * time.Second), ""},
		{"7d", "text", 0, now.Add(-7 * 24 * time.Hour), ""},
		{"0s", "text", 0, now, ""},
		{"2026-11-27T08:00:00Z", "text", 0, time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), ""},
		{"yesterday", "text", 0, time.Time{}, `--since "yesterday": give a duration`},
		{"-1h", "text", 0, time.Time{}, `--since "-1h"`},
		{"1.5d", "text", 0, time.Time{}, `--since "1.5d"`},
		{"1h", "yaml", 0, time.Time{}, `--output "yaml": choose text or json`},
		{"1h", "text", -1, time.Time{}, "--agent -1: give an agent's id"},
		{"1h", "text", 70000, time.Time{}, "--agent 70000"},
	} {
		o, err := eventOptions(tc.since, tc.agent, true, tc.output, now)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s %d: %v, want %q", tc.since, tc.output, tc.agent, err, tc.err)
		case tc.err == "" && (err != nil || !o.Since.Equal(tc.want) || o.Agent != tc.agent || !o.Follow):
			t.Errorf("%s %s %d: %+v %v, want since %v", tc.since, tc.output, tc.agent, o, err, tc.want)
		}
	}
}

// TestDriftRecords: one record per agent of what repaired its drift, one
// for the flock's own, bounded; failed: drift found, with the error.
// Tier: unit (no root).
func TestDriftRecords(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{
		{Kind: plan.EnsurePath, Target: "/srv/flock/agents/12", Why: "mode 0755, want 0700"},
		{Kind: plan.Firewall, Target: "inet flock", Why: "differs"},
		{Kind: plan.StartUnit, Target: "flock-agent@12.service", Why: "not running"},
		{Kind: plan.CreateIdentity, Target: "/var/lib/flock/creds/flock-3.nk", Why: "missing"},
		{Kind: plan.CreateUser, Target: "flock-3", Why: "missing"},
	}}
	got := driftRecords(p, nil)
	want := []events.Record{
		{Kind: events.DriftRepaired, Agent: 0, Detail: "repaired: replace firewall inet flock (differs)"},
		{Kind: events.DriftRepaired, Agent: 3, Detail: "repaired: create identity /var/lib/flock/creds/flock-3.nk (missing); create user flock-3 (missing)"},
		{Kind: events.DriftRepaired, Agent: 12, Detail: "repaired: ensure path /srv/flock/agents/12 (mode 0755, want 0700); start unit flock-agent@12.service (not running)"},
	}
	if len(got) != len(want) {
		t.Fatalf("records %+v", got)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Agent != want[i].Agent || got[i].Detail != want[i].Detail {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := driftRecords(p, errors.New("start unit: boom")); r[0].Kind != events.DriftFound || !strings.HasPrefix(r[0].Detail, "not repaired (start unit: boom): ") {
		t.Errorf("failed: %+v", r[0])
	}
	var many plan.Plan
	for i := 1; i <= 200; i++ {
		many.Changes = append(many.Changes, plan.Change{Kind: plan.StartUnit, Target: "flock-agent@" + strconv.Itoa(i) + ".service"})
	}
	r := driftRecords(many, nil)
	if len(r) != maxDriftRecords || r[len(r)-1].Detail != "repaired: and 151 more agents' drift" {
		t.Errorf("%d records, the last %+v", len(r), r[len(r)-1])
	}
}

// TestWallOf: a death is a wall's kill as units.Diagnose reads it, which
// knows the agent's jit: SIGTRAP is MemoryDenyWriteExecute only where the
// unit sets it. Tier: unit (no root).
func TestWallOf(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n  - id: 2\n    jit: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	wall := wallOf(f)
	for _, tc := range []struct {
		agent  int
		code   string
		status int
		want   string // "" none
	}{
		{1, "killed", 5, "likely MemoryDenyWriteExecute; fix: set jit: true on agent 1"},
		{2, "killed", 5, ""},
		{2, "killed", 31, "likely SystemCallFilter; fix: "},
		{1, "exited", 1, ""},
		{1, "killed", 9, ""},
		{3, "killed", 31, ""}, // not in the flock
	} {
		got, ok := wall(tc.agent, tc.code, tc.status)
		if ok != (tc.want != "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("agent %d %s %d: %q %v, want %q", tc.agent, tc.code, tc.status, got, ok, tc.want)
		}
	}
}

// TestRefusedCounts: the firewall's refusals reach events as its counts,
// uid by uid, and a failed read is an error. Tier: unit (no root).
func TestRefusedCounts(t *testing.T) {
	ctx := context.Background()
	f, err := spec.Count(2)
	if err != nil {
		t.Fatal(err)
	}
	fw := netpolicy.NewFake()
	if err := fw.Ensure(ctx, netpolicy.ForFlock(f)); err != nil {
		t.Fatal(err)
	}
	fw.Refuse(f.UID(2), netpolicy.FakeLogBurst+3)
	got, err := refusedCounts(fw)(ctx)
	want := map[uint32]events.Counts{f.UID(2): {Refused: netpolicy.FakeLogBurst + 3, Logged: netpolicy.FakeLogBurst}}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("counts %v (%v), want %v", got, err, want)
	}
	fw.Err = errors.New("no netlink")
	if _, err := refusedCounts(fw)(ctx); err == nil {
		t.Error("a failed read gave no error")
	}
}
