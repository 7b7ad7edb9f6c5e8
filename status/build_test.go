package status

// Tier: unit (no root): status read from the fakes of every boundary, as
// provision left them and after drift; no cobra, no host.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/plan/plantest"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// TestRead: a provisioned flock on the fakes, then drift (a unit failed,
// one restarted), refused packets and a bus that counts a violation:
// each shows in its agent's row, and the failed unit is drift.
func TestRead(t *testing.T) {
	ctx := context.Background()
	f, err := spec.Count(3)
	if err != nil {
		t.Fatal(err)
	}
	h, fk := plantest.Provisioned(t, f)
	u, fw := fk.Units, fk.Firewall
	d := plan.Build(f, plan.Site{}, units.Options{})
	u.SetExit(spec.UnitName(2), 2, units.Exit{Code: "exited", Status: 0})
	u.Fail(spec.UnitName(3))
	fw.Refuse(f.UID(1), 7)
	have, err := plan.Observe(ctx, h, d)
	if err != nil {
		t.Fatal(err)
	}
	r := Read(ctx, f, Sources{Host: h, Have: have, Drift: plan.Diff(d, have)})
	if len(r.Rows) != 3 || r.BusErr != nil || r.FirewallErr != nil || r.hosts {
		t.Fatalf("report %+v", r)
	}
	one, two, three := r.Rows[0], r.Rows[1], r.Rows[2]
	if one.State != "active" || one.RefusedPackets != 7 || one.Bus != "disconnected" || one.Drift != "" {
		t.Errorf("agent 1: %+v", one)
	}
	if two.Restarts != 2 || two.LastExit != "exited 0" || two.Diagnosis != nil {
		t.Errorf("agent 2: %+v", two)
	}
	if three.State != "failed" || !strings.Contains(three.Drift, "failed") {
		t.Errorf("agent 3: %+v", three)
	}
	var out, notes bytes.Buffer
	if err := r.Write(&out, &notes, true); err != nil {
		t.Fatal(err)
	}
	var rows []Agent
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 3 || rows[0].RefusedPackets != 7 {
		t.Errorf("JSON %s: %v", out.String(), err)
	}
}

// TestBuild: the rows and the text below the table from what was
// observed: a looping agent's diagnosis, a bus that did not answer, a
// firewall that could not be read, drift of the flock as a whole, and a
// proxy that is down for the agent with a name in its egress.
func TestBuild(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n    egress: [api.example.com:443]\n  - id: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	looping := units.Status{Name: spec.UnitName(2), ActiveState: "activating", SubState: "auto-restart", Restarts: 3, LastExit: units.Exit{Code: "killed", Status: 31}}
	o := Observed{
		Flock:  f,
		Drift:  plan.Plan{Changes: []plan.Change{{Kind: plan.Firewall, Target: "table inet flock", Why: "absent"}}},
		Units:  []units.Status{{Name: spec.UnitName(1), ActiveState: "active", SubState: "running"}, looping},
		BusErr: errors.New("no answer"), FirewallErr: errors.New("no netlink"), Proxy: "failed", IPCScoped: true, Now: time.Now(),
		Diagnose: func(a spec.Agent, st units.Status) *units.Diagnosis {
			if a.ID != 2 || st != looping {
				return nil
			}
			return &units.Diagnosis{Wall: "SystemCallFilter", Why: "SIGSYS", Fix: "the fix"}
		},
	}
	r := Build(o)
	if r.Rows[0].Proxy != "failed" || r.Rows[1].Proxy != "" || r.Rows[0].Bus != "unknown" || r.Rows[1].Diagnosis == nil {
		t.Errorf("rows %+v", r.Rows)
	}
	var out bytes.Buffer
	if err := r.Write(&out, nil, false); err != nil {
		t.Fatal(err)
	}
	_, below, _ := strings.Cut(out.String(), "flock-agent@2.service")
	_, below, _ = strings.Cut(below, "\n")
	want := "agent 2 keeps dying (3 restarts, last killed by SIGSYS). Likely wall: SystemCallFilter: SIGSYS.\n  fix: the fix\n" +
		"note: the bus did not answer: no answer\n" +
		"note: the firewall's refusal counts could not be read: no netlink\n" +
		"note: " + units.ProxyUnit + " is failed: agents 1 cannot reach the names in their egress or their model APIs (journalctl -u " + units.ProxyUnit + "; flockctl provision starts it)\n" +
		"drift: " + string(plan.Firewall) + " table inet flock: absent (flockctl provision repairs it)\n"
	if below != want {
		t.Errorf("below the table:\n%s\nwant:\n%s", below, want)
	}
}

// TestBuildNoQuorum: a bus that refuses tasks because its side of the
// cluster has no majority says so below the table, and on stderr with
// --output json. Tier: unit.
func TestBuildNoQuorum(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := Build(Observed{Flock: f, Units: []units.Status{{Name: spec.UnitName(1), ActiveState: "active", SubState: "running"}},
		Bus: &wire.BusStatus{Sync: "always", NoQuorum: "host a cannot store tasks now: no leader"}, IPCScoped: true, Now: time.Now()})
	const want = "note: tasks sent on this host are refused: host a cannot store tasks now: no leader\n"
	var out, notes bytes.Buffer
	if err := r.Write(&out, nil, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("status:\n%s\nwant it to end with %q", out.String(), want)
	}
	out.Reset()
	if err := r.Write(&out, &notes, true); err != nil {
		t.Fatal(err)
	}
	if notes.String() != want || strings.Contains(out.String(), "cannot store") {
		t.Errorf("--output json: notes %q, document %s", notes.String(), out.String())
	}
}
