package users

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Fake is an in-memory Host for planner tests.
type Fake struct {
	mu       sync.Mutex
	accounts map[string]Account
	shared   *Group
	paths    map[string]Path
	// Foreign are names held by someone else; Claim refuses them.
	Foreign map[string]bool
	// foreignUIDs are uids held by someone else (AddForeign).
	foreignUIDs map[uint32]bool
}

// NewFake returns an empty host.
func NewFake() *Fake {
	return &Fake{accounts: map[string]Account{}, paths: map[string]Path{}, Foreign: map[string]bool{}, foreignUIDs: map[uint32]bool{}}
}

// AddForeign is a user someone else made (an operator's useradd): its
// name and uid are refused by Claim, and nothing here removes it.
func (f *Fake) AddForeign(name string, uid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Foreign[name] = true
	f.foreignUIDs[uid] = true
}

var _ Host = (*Fake)(nil)

func (f *Fake) Accounts(ctx context.Context) ([]Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Account, 0, len(f.accounts))
	for _, a := range f.accounts {
		if f.shared == nil { // the shared group is gone: nobody is in it
			a.Groups = nil
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

func (f *Fake) Claim(ctx context.Context, shared Group, accts []Account) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range accts {
		if f.Foreign[a.Name] {
			return fmt.Errorf("%w: user %q", ErrNotOurs, a.Name)
		}
		if f.foreignUIDs[a.UID] {
			return fmt.Errorf("%w: uid %d (for %s)", ErrNotOurs, a.UID, a.Name)
		}
	}
	return nil
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
	var errs []error
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
		switch {
		case old.UID != a.UID:
			errs = append(errs, fmt.Errorf("user %s has uid %d, want %d", a.Name, old.UID, a.UID))
		case !SameGroups(old.Groups, a.Groups):
			errs = append(errs, fmt.Errorf("user %s is in groups %v, want %v", a.Name, old.Groups, a.Groups))
		}
	}
	return errors.Join(errs...)
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
