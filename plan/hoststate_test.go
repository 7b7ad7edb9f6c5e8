package plan

// Tier: unit (no root). A host state saved, encoded and decoded plans
// what the live host plans.

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Against a host provisioned with threeAgents and then drifted, every
// spec's plan from the saved state (read with the paths of both flocks,
// encoded, decoded) is the plan from the live host.
func TestASavedHostStatePlansAsTheLiveHost(t *testing.T) {
	ctx := context.Background()
	was := mustParse(t, threeAgents)
	specs := map[string]*spec.Flock{
		"the same":              was,
		"an agent more":         mustParse(t, threeAgents+"  - id: 4\n"),
		"an agent less":         mustParse(t, "agents:\n  - id: 1\n  - id: 2\n"),
		"a name in its egress":  mustParse(t, "agents:\n  - id: 1\n    egress: [\"api.example.com:443\"]\n  - id: 2\n  - id: 3\n"),
		"another uid_base":      mustParse(t, "uid_base: 3000000000\n"+threeAgents),
		"bus metrics turned on": mustParse(t, "bus:\n  metrics: 127.0.0.1:8223\n"+threeAgents),
	}
	for _, drift := range []struct {
		name string
		do   func(fakes)
	}{
		{"none", func(fakes) {}},
		{"a unit failed", func(fk fakes) { fk.units.Fail(spec.UnitName(2)) }},
		{"the table removed", func(fk fakes) { _ = fk.fw.Remove(ctx) }},
		{"a directory removed", func(fk fakes) { _ = fk.users.RemovePaths(ctx, []string{was.AgentDir(3)}) }},
		{"the bus stopped", func(fk fakes) { fk.units.StopService() }},
		{"an old bus running", func(fk fakes) { fk.bus.RunOld() }},
	} {
		h, fk := newFakes()
		provision(t, h, was)
		drift.do(fk)
		for name, f := range specs {
			d := Build(f, Site{}, units.Options{})
			live, err := Observe(ctx, h, d)
			if err != nil {
				t.Fatalf("drift %s, spec %s: observe: %v", drift.name, name, err)
			}
			read, err := Read(ctx, h, FlockPaths(was, f))
			if err != nil {
				t.Fatal(err)
			}
			b, err := EncodeHostState(read)
			if err != nil {
				t.Fatal(err)
			}
			saved, err := DecodeHostState(b)
			if err != nil {
				t.Fatalf("decoding what was encoded: %v\n%s", err, b)
			}
			cur, err := saved.Current(d)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := Diff(d, cur), Diff(d, live); !reflect.DeepEqual(got, want) {
				t.Errorf("drift %s, spec %s: the saved state plans\n%s\nthe live host\n%s", drift.name, name, got, want)
			}
		}
	}
}

// An empty state is a host flock never touched: its plan is a first
// provision's.
func TestAnEmptyHostStatePlansAFirstProvision(t *testing.T) {
	f := mustParse(t, threeAgents)
	d := Build(f, Site{}, units.Options{})
	cur, err := HostState{}.Current(d)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newFakes()
	if got, want := Diff(d, cur), provision(t, h, f); !reflect.DeepEqual(got, want) {
		t.Errorf("an empty state plans\n%s\na first provision\n%s", got, want)
	}
}

// The codec keeps what it cannot encode as JSON (the bus's error, as its
// text) and refuses what it did not write, saying what to do.
func TestHostStateCodec(t *testing.T) {
	b, err := EncodeHostState(HostState{BusErr: errors.New("bus: no answer")})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := DecodeHostState(b); err != nil || s.BusErr == nil || s.BusErr.Error() != "bus: no answer" {
		t.Errorf("the bus's error round trip: %v, %v", s.BusErr, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"format": 2}`, "a host state of format 2; this flockctl reads format 1: save it again"},
		{`{"format": 1, "agents": []}`, `not a host state flockctl state save wrote: json: unknown field "agents"`},
		{`agents: []`, "not a host state flockctl state save wrote"},
	} {
		if _, err := DecodeHostState([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decoding %s: %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}
