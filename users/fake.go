package users

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
)

// Fake is an in-memory Host for planner tests. It checks its accounts
// with System's own rules (claim, verify, what Accounts lists), over the
// /etc it would be (etc), so the two cannot drift.
type Fake struct {
	mu       sync.Mutex
	accounts map[string]Account
	shared   *Group
	paths    map[string]Path
	// foreign are users someone else made, name to uid (AddForeign).
	foreign map[string]uint32
	// readers is spec.ReadersGroup's gid (nil: no such group);
	// readersOurs is flock's record that it made the group.
	readers     *uint32
	readersOurs bool
}

// fakeReadersGID is the gid the fake's system group gets, as sysusers
// would pick one below 1000.
const fakeReadersGID = 990

// NewFake returns an empty host.
func NewFake() *Fake {
	return &Fake{accounts: map[string]Account{}, paths: map[string]Path{}, foreign: map[string]uint32{}}
}

// AddForeign is a user someone else made (an operator's useradd, with a
// group of its own): its name and uid are refused by Claim, and nothing
// here removes it.
func (f *Fake) AddForeign(name string, uid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.foreign[name] = uid
}

var _ Host = (*Fake)(nil)

// etc is the fake as /etc/passwd and /etc/group would hold it: its
// accounts with their own groups, the shared group with its members
// (none once it is gone), and the foreign users. Call with f.mu held.
func (f *Fake) etc() etcDB {
	var db etcDB
	for name, uid := range f.foreign {
		db.users = append(db.users, passwdEntry{Name: name, UID: uid, GID: uid})
		db.groups = append(db.groups, groupEntry{Name: name, GID: uid})
	}
	var members []string
	for _, a := range f.accounts {
		db.users = append(db.users, passwdEntry{Name: a.Name, UID: a.UID, GID: a.UID, Comment: a.Comment, Home: a.Home})
		db.groups = append(db.groups, groupEntry{Name: a.Name, GID: a.UID})
		if f.shared != nil && slices.Contains(a.Groups, f.shared.Name) {
			members = append(members, a.Name)
		}
	}
	slices.SortFunc(db.users, func(a, b passwdEntry) int { return cmp.Compare(a.UID, b.UID) })
	if f.shared != nil {
		slices.Sort(members)
		db.groups = append(db.groups, groupEntry{Name: f.shared.Name, GID: f.shared.GID, Members: members})
	}
	return db
}

func (f *Fake) Accounts(ctx context.Context) ([]Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.etc().accounts(), nil
}

func (f *Fake) Claim(ctx context.Context, shared Group, accts []Account) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return claim(f.etc(), shared, accts)
}

func (f *Fake) EnsureAccounts(ctx context.Context, shared Group, accts []Account) error {
	if err := f.Claim(ctx, shared, accts); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shared = &shared
	// Like sysusers, never modify an account but add its memberships;
	// like System, say when the result is not what was asked.
	for _, a := range accts {
		old, ok := f.accounts[a.Name]
		if !ok {
			f.accounts[a.Name] = a
			continue
		}
		for _, g := range a.Groups {
			if !slices.Contains(old.Groups, g) {
				old.Groups = append(slices.Clone(old.Groups), g)
			}
		}
		f.accounts[a.Name] = old
	}
	return verify(f.etc(), shared, accts)
}

func (f *Fake) RemoveAccounts(ctx context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		delete(f.accounts, n)
	}
	return nil
}

func (f *Fake) RemoveAll(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accounts, f.shared = map[string]Account{}, nil
	return nil
}

// RemoveSharedGroup is drift: an operator deleted group flock.
func (f *Fake) RemoveSharedGroup() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shared = nil
}

func (f *Fake) PathState(ctx context.Context, path string) (Path, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.paths[path]
	return p, ok, nil
}

// EnsurePaths refuses, as System does, a path of the wrong type: it may
// be an operator's data.
func (f *Fake) EnsurePaths(ctx context.Context, paths []Path) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// An Existing path absent here is taken as there: another fake (the
	// bus's identities) makes it, which this one cannot see.
	for _, p := range paths {
		if old, ok := f.paths[p.Path]; ok && (old.Dir != p.Dir || old.Mode&fs.ModeSymlink != 0) {
			return fmt.Errorf("%s exists but is of the wrong type (dir %v, mode %v): move it away and provision again", p.Path, old.Dir, old.Mode)
		}
		f.paths[p.Path] = p
	}
	return nil
}

// SetPath is drift: something changed a path by hand.
func (f *Fake) SetPath(p Path) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths[p.Path] = p
}

func (f *Fake) RemovePaths(ctx context.Context, paths []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, root := range paths {
		for p := range f.paths {
			if p == root || strings.HasPrefix(p, root+"/") {
				delete(f.paths, p)
			}
		}
	}
	return nil
}

func (f *Fake) Readers(ctx context.Context) (uint32, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readers == nil {
		return 0, false, nil
	}
	return *f.readers, true, nil
}

func (f *Fake) EnsureReaders(ctx context.Context) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readers == nil {
		gid := uint32(fakeReadersGID)
		f.readers, f.readersOurs = &gid, true
	}
	return *f.readers, nil
}

func (f *Fake) RemoveReaders(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readersOurs {
		f.readers, f.readersOurs = nil, false
	}
	return nil
}

// AddForeignReaders is spec.ReadersGroup made by someone else (an
// operator's groupadd before flock's first provision), with gid.
func (f *Fake) AddForeignReaders(gid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readers, f.readersOurs = &gid, false
}

// DeleteReaders is drift: someone deleted spec.ReadersGroup by hand;
// flock's record that it made the group, if it did, stays.
func (f *Fake) DeleteReaders() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readers = nil
}
