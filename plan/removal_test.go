package plan

// Tier: unit (no root): what a deprovision would remove, read from the
// fakes, is what Remove and RemoveAll then take away.

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

func TestReadRemoval(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, "agents:\n  - id: 1\n    egress: [\"api.example.com:443\"]\n  - id: 2\n  - id: 3\n")
	provision(t, h, f)
	store := units.BusStateDirs[0]
	fk.users.SetPath(users.Path{Path: store, Dir: true, Mode: 0o700})
	for _, tc := range []struct {
		name   string
		ids    []int
		purge  bool
		agents []int
		flock  []string // each in a phrase, in order
		paths  []string // each at the start of one, in order
	}{
		{"one agent", []int{3}, false, []int{3}, nil, []string{f.AgentDir(3), f.LogPath(3)}},
		{"the proxy's last agent", []int{1, 9}, true, []int{1}, []string{units.ProxyUnit}, []string{f.AgentDir(1), f.LogPath(1)}},
		{"every agent", []int{1, 2, 3}, false, []int{1, 2, 3}, []string{"table inet flock (no agent remains)", units.ProxyUnit}, nil},
		{"none of the flock's", []int{9}, true, nil, nil, nil},
	} {
		r, err := ReadRemoval(ctx, h, f, tc.ids, tc.purge)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Agents, tc.agents) || !startEach(r.Flock, tc.flock) || (tc.paths != nil && !startEach(r.Paths, tc.paths)) {
			t.Errorf("%s: %+v", tc.name, r)
		}
		if r.Empty() != (tc.agents == nil) {
			t.Errorf("%s: empty %v:\n%s", tc.name, r.Empty(), r)
		}
	}
	all, err := ReadRemovalAll(ctx, h, f.Root, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all.Agents, []int{1, 2, 3}) || !startEach(all.Flock, []string{"table inet flock", units.BusUnit, units.ProxyUnit, units.CountersSocket, "the bus's config"}) ||
		!startEach(all.Paths, []string{f.Root + " (", store + " (the bus's store"}) {
		t.Errorf("--all --purge:\n%s", all)
	}
	if !all.Readers || !strings.Contains(all.String(), "  group "+spec.ReadersGroup+", if flock made it") {
		t.Errorf("--all --purge does not name the readers' group:\n%s", all)
	}
	if err := RemoveAll(ctx, h, f.Root, true); err != nil {
		t.Fatal(err)
	}
	if after, err := ReadRemovalAll(ctx, h, f.Root, true); err != nil || !after.Empty() || after.String() != "nothing to remove\n" {
		t.Errorf("after RemoveAll: %v\n%s", err, after)
	}
}

// startEach says whether got has as many entries as prefixes, each
// starting with its own.
func startEach(got, prefixes []string) bool {
	if len(got) != len(prefixes) {
		return false
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(got[i], p) {
			return false
		}
	}
	return true
}
