package plan

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
)

// What provision hands the readers' group, read back from the fakes:
// flock's state directory to list, the credentials directory to pass
// through, and the reader's seed; nothing else is the group's, and no
// file it writes is anyone's to read but its owner's (and the reader's
// seed its group's). The operator's, the proxy's and the agents' seeds
// stay their owners' (creds' TestSeedModes); model keys and the cluster's
// material are not provision's files.
//
// Tier: unit (no root).
func TestWhatTheReadersRead(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents+"    egress: [\"api.example.com:443\"]\n")
	provision(t, h, f)
	gid, ok, err := fk.users.Readers(ctx)
	if err != nil || !ok {
		t.Fatalf("no readers' group after provision: %v", err)
	}
	type access struct {
		path string
		bits fs.FileMode // the group's r, w, x
	}
	var granted []access
	for _, path := range FlockPaths(f) {
		p, ok, err := fk.users.PathState(ctx, path)
		if err != nil || !ok {
			t.Fatalf("%s: not there after provision (%v)", path, err)
		}
		if p.GID == gid && p.Mode&0o070 != 0 {
			granted = append(granted, access{path, p.Mode & 0o070})
		}
		if !p.Dir && p.Mode&0o004 != 0 {
			t.Errorf("%s is anyone's to read (%v)", path, p.Mode)
		}
		if p.GID == gid && p.UID != 0 {
			t.Errorf("%s is the readers' group's but uid %d's", path, p.UID)
		}
	}
	want := []access{
		{spec.StateDir, 0o050},
		{spec.CredDir, 0o010},
		{spec.CredPath(creds.ReaderName), 0o040},
	}
	slices.SortFunc(want, func(a, b access) int { return cmp.Compare(a.path, b.path) })
	if !slices.Equal(granted, want) {
		t.Errorf("the readers' group reads %v, want %v", granted, want)
	}
}

// The readers' group: made by the first provision, or an operator's made
// before it used as it is; deprovision --all keeps it (its members are
// people), --purge removes it if flock made it.
//
// Tier: unit (no root).
func TestReadersGroupLifecycle(t *testing.T) {
	ctx := context.Background()
	f := mustParse(t, threeAgents)
	for _, tc := range []struct {
		name        string
		theirs      bool
		afterPurge  bool
		wantCreated int
	}{
		{"made by flock", false, false, 1},
		{"made by the operator", true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, fk := newFakes()
			if tc.theirs {
				fk.users.AddForeignReaders(4242)
			}
			p := provision(t, h, f)
			if n := p.Count(CreateGroup); n != tc.wantCreated {
				t.Errorf("%d create group changes, want %d:\n%s", n, tc.wantCreated, p)
			}
			gid, _, _ := fk.users.Readers(ctx)
			if st, _, _ := fk.users.PathState(ctx, spec.StateDir); st.GID != gid || (tc.theirs && gid != 4242) {
				t.Errorf("%s has gid %d, the group %d", spec.StateDir, st.GID, gid)
			}
			if err := RemoveAll(ctx, h, f.Root, false); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := fk.users.Readers(ctx); !ok {
				t.Error("deprovision --all removed the readers' group")
			}
			if err := RemoveAll(ctx, h, f.Root, true); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := fk.users.Readers(ctx); ok != tc.afterPurge {
				t.Errorf("after --purge the group is there: %v, want %v", ok, tc.afterPurge)
			}
		})
	}
}

// noKeys is a bus host whose credentials are root's: the readers' group
// cannot list them.
type noKeys struct{ bus.Host }

func (noKeys) Keys(context.Context) (map[string]string, error) {
	return nil, errors.New("permission denied")
}

// ReadRunning reads what status shows without root, and nothing else: a
// host with no accounts, paths, firewall or proxy to read, and whose
// credentials it may not list, is read all the same.
//
// Tier: unit (no root).
func TestReadRunningNeedsNoRoot(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	c, err := ReadRunning(ctx, Host{Units: h.Units, Bus: noKeys{fk.bus}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Units) != 3 || c.BusConfig == nil || c.Service.ActiveState != "active" || c.BusStatus == nil {
		t.Errorf("read: %d units, bus config %v, bus %q, status %v", len(c.Units), c.BusConfig != nil, c.Service.ActiveState, c.BusStatus)
	}
}
