// Package userstest is the conformance suite of users.Host: the fake (in
// users' unit tests) and the real host (its paths in users' root tier, its
// accounts in a booted machine's own /etc, test.TestConformance) run the
// same steps, so the fake the planner is tested against cannot drift.
package userstest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/users"
)

// flock is agents 1..n at the default uid base, rooted at root.
func flock(root string, n int) *spec.Flock {
	f := &spec.Flock{Root: root, UIDBase: spec.DefaultUIDBase}
	for id := 1; id <= n; id++ {
		f.Agents = append(f.Agents, spec.Agent{ID: id})
	}
	return f
}

// Foreign adds a user flock did not create, as an operator's useradd
// would: a local user that is not one of flock's, holding name and uid.
type Foreign func(t *testing.T, h users.Host, name string, uid uint32)

// Accounts checks the accounts half of the contract: EnsureAccounts
// creates what is missing and is idempotent, never changes an account's
// uid (it says so instead), and Accounts reads back what it made;
// RemoveAccounts and RemoveAll forget flock's accounts and ignore names
// that are gone; a name or uid someone else holds is refused with
// ErrNotOurs by Claim and EnsureAccounts, and survives every removal.
// newHost returns a host with no flock accounts, no group "flock" and the
// suite's ids (uid base spec.DefaultUIDBase, agents 1-9) free.
func Accounts(t *testing.T, newHost func(t *testing.T) users.Host, foreign Foreign) {
	ctx := context.Background()
	h := newHost(t)
	t.Cleanup(func() {
		if err := h.RemoveAll(ctx); err != nil {
			t.Errorf("cleanup: RemoveAll: %v", err)
		}
	})
	shared, all := users.Accounts(flock(spec.DefaultRoot, 3))
	_, nine := users.Accounts(flock(spec.DefaultRoot, 9))
	flock9 := nine[8]
	moved := all[0]
	moved.UID += 50 // free: above every agent of the suite
	// flock-8 asks for the uid flock-9 holds.
	uidTaken := nine[7]
	uidTaken.UID = flock9.UID

	for _, s := range []struct {
		name    string
		do      func() error
		wantErr error // nil: none; errAny: any error
		want    []users.Account
	}{
		{name: "a fresh host has no flock accounts, and nothing is claimed", do: func() error { return h.Claim(ctx, shared, all) }},
		{name: "EnsureAccounts creates them", do: func() error { return h.EnsureAccounts(ctx, shared, all[:2]) }, want: all[:2]},
		{name: "EnsureAccounts again changes nothing", do: func() error { return h.EnsureAccounts(ctx, shared, all[:2]) }, want: all[:2]},
		{name: "EnsureAccounts of more adds the missing one", do: func() error { return h.EnsureAccounts(ctx, shared, all) }, want: all},
		{name: "EnsureAccounts does not move an account to another uid; it says so",
			do: func() error { return h.EnsureAccounts(ctx, shared, []users.Account{moved, all[1], all[2]}) }, wantErr: errAny, want: all},
		{name: "RemoveAccounts forgets them and ignores names that are gone",
			do: func() error { return h.RemoveAccounts(ctx, []string{all[2].Name, "flock-7"}) }, want: all[:2]},
		{name: "RemoveAccounts of nothing", do: func() error { return h.RemoveAccounts(ctx, nil) }, want: all[:2]},
		{name: "someone else's user is not listed", do: func() error { foreign(t, h, flock9.Name, flock9.UID); return nil }, want: all[:2]},
		{name: "Claim refuses a name someone else holds", do: func() error { return h.Claim(ctx, shared, []users.Account{flock9}) }, wantErr: users.ErrNotOurs, want: all[:2]},
		{name: "Claim refuses a uid someone else holds", do: func() error { return h.Claim(ctx, shared, []users.Account{uidTaken}) }, wantErr: users.ErrNotOurs, want: all[:2]},
		{name: "EnsureAccounts refuses it and creates nothing",
			do: func() error { return h.EnsureAccounts(ctx, shared, append(all[:2:2], all[2], flock9)) }, wantErr: users.ErrNotOurs, want: all[:2]},
		{name: "RemoveAccounts leaves someone else's user",
			do: func() error { return h.RemoveAccounts(ctx, []string{flock9.Name}) }, want: all[:2]},
		{name: "... which Claim still refuses", do: func() error { return h.Claim(ctx, shared, []users.Account{flock9}) }, wantErr: users.ErrNotOurs, want: all[:2]},
		{name: "RemoveAll forgets every flock account", do: func() error { return h.RemoveAll(ctx) }},
		{name: "RemoveAll again is not an error", do: func() error { return h.RemoveAll(ctx) }},
		{name: "RemoveAll left someone else's user", do: func() error { return h.Claim(ctx, shared, []users.Account{flock9}) }, wantErr: users.ErrNotOurs},
		{name: "EnsureAccounts after RemoveAll creates them again", do: func() error { return h.EnsureAccounts(ctx, shared, all[:1]) }, want: all[:1]},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			checkErr(t, s.do(), s.wantErr)
			checkAccounts(t, h, s.want)
		}) {
			t.FailNow()
		}
	}
}

// errAny stands for "some error" where the contract names no sentinel.
var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && err == nil:
		t.Fatalf("no error, want %v", want)
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Fatalf("error %v does not match %v", err, want)
	case err != nil:
		t.Logf("error, as it should: %v", err)
	}
}

// checkAccounts compares what Accounts lists with want, in any order, on
// every field Account has.
func checkAccounts(t *testing.T, h users.Host, want []users.Account) {
	t.Helper()
	got, err := h.Accounts(context.Background())
	if err != nil {
		t.Fatalf("Accounts: %v", err)
	}
	if s, w := accountsText(got), accountsText(want); s != w {
		t.Errorf("Accounts:\n%s\nwant:\n%s", s, w)
	}
}

func accountsText(as []users.Account) string {
	lines := make([]string, 0, len(as))
	for _, a := range as {
		lines = append(lines, fmt.Sprintf("%s uid %d home %s comment %q groups %v",
			a.Name, a.UID, a.Home, a.Comment, slices.Sorted(slices.Values(a.Groups))))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// Paths checks the paths half of the contract: EnsurePaths creates the
// tree (owners, modes, default ACL) as PathState reads it back, is
// idempotent, repairs an owner or a mode, and refuses (changing nothing)
// a path of the wrong type; RemovePaths deletes a path with everything
// below it and ignores one that is gone. newHost returns the host and a
// directory that does not exist, whose parent does.
func Paths(t *testing.T, newHost func(t *testing.T) (h users.Host, root string)) {
	ctx := context.Background()
	h, root := newHost(t)
	f := flock(root, 2)
	want := users.Paths(f)
	byPath := map[string]users.Path{}
	for _, p := range want {
		byPath[p.Path] = p
	}
	with := func(path string, change func(*users.Path)) users.Path {
		p := byPath[path]
		change(&p)
		return p
	}
	ensure := func(ps ...users.Path) func() error {
		return func() error { return h.EnsurePaths(ctx, ps) }
	}
	remove := func(ps ...string) func() error {
		return func() error { return h.RemovePaths(ctx, ps) }
	}
	looser := with(f.AgentDir(1), func(p *users.Path) { p.Mode = 0o750 })
	stolen := with(f.LogPath(1), func(p *users.Path) { p.UID, p.GID = f.UID(2), f.UID(2) })
	dirForFile := with(f.LogPath(1), func(p *users.Path) { p.Dir = true; p.Mode = 0o700 })
	fileForDir := with(f.AgentDir(1), func(p *users.Path) { p.Dir = false; p.Mode = 0o600 })
	logs := []string{f.LogsDir(), f.LogPath(1), f.LogPath(2)}

	for _, s := range []struct {
		name    string
		do      func() error
		wantErr bool
		have    []users.Path // as PathState must read them
		missing []string
	}{
		{name: "a fresh root has none of the paths", missing: paths(want)},
		{name: "EnsurePaths creates the tree", do: ensure(want...), have: want},
		{name: "EnsurePaths again changes nothing", do: ensure(want...), have: want},
		{name: "EnsurePaths sets another mode", do: ensure(looser), have: []users.Path{looser}},
		{name: "EnsurePaths repairs a mode", do: ensure(want...), have: want},
		{name: "EnsurePaths sets another owner", do: ensure(stolen), have: []users.Path{stolen}},
		{name: "EnsurePaths repairs an owner", do: ensure(want...), have: want},
		{name: "EnsurePaths refuses a directory where a file is", do: ensure(dirForFile), wantErr: true, have: want},
		{name: "EnsurePaths refuses a file where a directory is", do: ensure(fileForDir), wantErr: true, have: want},
		{name: "RemovePaths deletes a directory with everything below it", do: remove(f.LogsDir()), missing: logs,
			have: without(want, logs)},
		{name: "RemovePaths of a path that is gone is not an error", do: remove(f.LogsDir(), filepath.Join(root, "nothing")), missing: logs,
			have: without(want, logs)},
		{name: "EnsurePaths re-creates what is missing", do: ensure(want...), have: want},
		{name: "RemovePaths of the root deletes everything", do: remove(root), missing: paths(want)},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			if s.do != nil {
				err := s.do()
				switch {
				case s.wantErr && err == nil:
					t.Errorf("no error")
				case !s.wantErr && err != nil:
					t.Fatal(err)
				case err != nil:
					t.Logf("error, as it should: %v", err)
				}
			}
			for _, w := range s.have {
				got, ok, err := h.PathState(ctx, w.Path)
				if err != nil || !ok {
					t.Errorf("PathState(%s) = %v, %v; want it present", w.Path, ok, err)
					continue
				}
				if d := pathDiff(got, w); d != "" {
					t.Errorf("PathState(%s): %s", w.Path, d)
				}
			}
			for _, p := range s.missing {
				if got, ok, err := h.PathState(ctx, p); ok || err != nil {
					t.Errorf("PathState(%s) = %+v, %v, %v; want it missing", p, got, ok, err)
				}
			}
		}) {
			t.FailNow()
		}
	}
}

func paths(ps []users.Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Path
	}
	return out
}

func without(ps []users.Path, gone []string) []users.Path {
	return slices.DeleteFunc(slices.Clone(ps), func(p users.Path) bool { return slices.Contains(gone, p.Path) })
}

// pathDiff says how got differs from want in what the planner compares.
func pathDiff(got, want users.Path) string {
	var d []string
	if got.Dir != want.Dir {
		d = append(d, fmt.Sprintf("dir %v, want %v", got.Dir, want.Dir))
	}
	if got.UID != want.UID || got.GID != want.GID {
		d = append(d, fmt.Sprintf("owner %d:%d, want %d:%d", got.UID, got.GID, want.UID, want.GID))
	}
	if got.Mode != want.Mode {
		d = append(d, fmt.Sprintf("mode %v, want %v", got.Mode, want.Mode))
	}
	if acl(got.DefaultGroupRW) != acl(want.DefaultGroupRW) {
		d = append(d, fmt.Sprintf("default ACL %s, want %s", acl(got.DefaultGroupRW), acl(want.DefaultGroupRW)))
	}
	return strings.Join(d, "; ")
}

func acl(gid *uint32) string {
	if gid == nil {
		return "none"
	}
	return fmt.Sprintf("group %d rwX", *gid)
}

// ForeignReaders makes spec.ReadersGroup as an operator's groupadd
// would, with gid, before flock does.
type ForeignReaders func(t *testing.T, h users.Host, gid uint32)

// Readers checks the readers' group's half of the contract: EnsureReaders
// creates the group once and Readers reads its gid back; RemoveAll keeps
// it (its members are people); RemoveReaders deletes the group flock made
// and is idempotent; a group of that name someone else made is used as
// it is and survives RemoveReaders. newHost returns a host without the
// group.
func Readers(t *testing.T, newHost func(t *testing.T) users.Host, foreign ForeignReaders) {
	ctx := context.Background()
	h := newHost(t)
	t.Cleanup(func() {
		if err := h.RemoveReaders(ctx); err != nil {
			t.Errorf("cleanup: RemoveReaders: %v", err)
		}
	})
	var made uint32
	const theirs = 4242
	for _, s := range []struct {
		name string
		do   func() error
		want func() (uint32, bool) // the group's gid and whether it is there
	}{
		{"a fresh host has no readers' group", nil, func() (uint32, bool) { return 0, false }},
		{"EnsureReaders creates it", func() (err error) { made, err = h.EnsureReaders(ctx); return err }, func() (uint32, bool) { return made, true }},
		{"EnsureReaders again keeps its gid", func() error {
			gid, err := h.EnsureReaders(ctx)
			if err == nil && gid != made {
				err = fmt.Errorf("gid %d, was %d", gid, made)
			}
			return err
		}, func() (uint32, bool) { return made, true }},
		{"RemoveAll keeps it", func() error { return h.RemoveAll(ctx) }, func() (uint32, bool) { return made, true }},
		{"RemoveReaders deletes the group flock made", func() error { return h.RemoveReaders(ctx) }, func() (uint32, bool) { return 0, false }},
		{"RemoveReaders again is not an error", func() error { return h.RemoveReaders(ctx) }, func() (uint32, bool) { return 0, false }},
		{"someone else's group is used as it is", func() error {
			foreign(t, h, theirs)
			gid, err := h.EnsureReaders(ctx)
			if err == nil && gid != theirs {
				err = fmt.Errorf("gid %d, want theirs, %d", gid, theirs)
			}
			return err
		}, func() (uint32, bool) { return theirs, true }},
		{"RemoveReaders keeps someone else's group", func() error { return h.RemoveReaders(ctx) }, func() (uint32, bool) { return theirs, true }},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			if s.do != nil {
				checkErr(t, s.do(), nil)
			}
			gid, ok, err := h.Readers(ctx)
			if err != nil {
				t.Fatalf("Readers: %v", err)
			}
			if wantGID, wantOK := s.want(); ok != wantOK || (ok && gid != wantGID) {
				t.Errorf("Readers: gid %d, there %v; want gid %d, there %v", gid, ok, wantGID, wantOK)
			}
			if ok && gid == 0 {
				t.Errorf("the readers' group has gid 0 (root's)")
			}
		}) {
			t.FailNow()
		}
	}
}
