package users

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/spec"
)

// System is the real Host: /etc/passwd and /etc/group through
// systemd-sysusers, userdel and groupdel, and the directory tree.
type System struct {
	EtcDir       string // /etc
	SysusersPath string // /etc/sysusers.d/flock.conf
	// ReadersSysusersPath is the readers' group's drop-in; "": beside
	// SysusersPath.
	ReadersSysusersPath string
}

// NewHost returns the Host of this machine.
func NewHost() *System {
	return &System{EtcDir: "/etc", SysusersPath: SysusersPath, ReadersSysusersPath: ReadersSysusersPath}
}

var _ Host = (*System)(nil)

func (s *System) Accounts(ctx context.Context) ([]Account, error) {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return nil, err
	}
	return db.accounts(), nil
}

func (s *System) Claim(ctx context.Context, shared Group, accts []Account) error {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return err
	}
	return claim(db, shared, accts)
}

// EnsureAccounts writes the drop-in and has systemd-sysusers create what is
// missing, then checks the result: sysusers skips an id it finds taken
// instead of failing, and that must not pass unseen.
func (s *System) EnsureAccounts(ctx context.Context, shared Group, accts []Account) error {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return err
	}
	if err := claim(db, shared, accts); err != nil {
		return err
	}
	// sysusers never changes an existing group: a shared group left with
	// an old uid_base's gid is recreated.
	if g, ok := db.group(shared.Name); ok && g.GID != shared.GID {
		if err := run(ctx, "groupdel", shared.Name); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.SysusersPath), 0o755); err != nil {
		return err
	}
	if err := renameio.WriteFile(s.SysusersPath, []byte(RenderSysusers(shared, accts)), 0o644, renameio.WithStaticPermissions(0o644)); err != nil {
		return fmt.Errorf("writing %s: %w", s.SysusersPath, err)
	}
	if err := run(ctx, "systemd-sysusers", s.SysusersPath); err != nil {
		return err
	}
	if db, err = readEtc(s.EtcDir); err != nil {
		return err
	}
	return verify(db, shared, accts)
}

// verify says how the accounts db holds differ from those EnsureAccounts
// asked for: the shared group and each account present, with its uid and
// groups. System checks /etc with it, and Fake its own (Fake.etc).
func verify(db etcDB, shared Group, accts []Account) error {
	var errs []error
	if g, ok := db.group(shared.Name); !ok || g.GID != shared.GID {
		errs = append(errs, fmt.Errorf("systemd-sysusers did not create group %s with gid %d", shared.Name, shared.GID))
	}
	have := map[string]Account{}
	for _, a := range db.accounts() {
		have[a.Name] = a
	}
	for _, want := range accts {
		got, ok := have[want.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("systemd-sysusers did not create user %s", want.Name))
		case got.UID != want.UID:
			errs = append(errs, fmt.Errorf("user %s has uid %d, want %d", want.Name, got.UID, want.UID))
		case !SameGroups(got.Groups, want.Groups):
			errs = append(errs, fmt.Errorf("user %s is in groups %v, want %v", want.Name, got.Groups, want.Groups))
		}
	}
	return errors.Join(errs...)
}

// RemoveAccounts drops names from the drop-in first (so a crash half-way
// cannot have sysusers bring them back at boot), then deletes them.
func (s *System) RemoveAccounts(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := s.dropFromSysusers(names); err != nil {
		return err
	}
	return s.deleteAccounts(ctx, names)
}

// deleteAccounts removes the named users of flock's and their own groups
// (left behind by a run killed half-way too), in one rewrite of the
// account files for any number of them.
func (s *System) deleteAccounts(ctx context.Context, names []string) error {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, name := range names {
		if u, ok := db.user(name); ok && !ours(u) {
			continue // never ours to delete
		}
		gone[name] = true
	}
	if err := removeFromEtc(s.EtcDir, gone); err != nil {
		return err
	}
	forgetCached(ctx)
	return nil
}

// forgetCached tells nscd, where it runs, that the account files changed,
// as userdel does.
func forgetCached(ctx context.Context) {
	if _, err := exec.LookPath("nscd"); err == nil {
		_ = run(ctx, "nscd", "-i", "passwd")
		_ = run(ctx, "nscd", "-i", "group")
	}
}

// goneAnyway reads /etc again after a userdel or groupdel. A failure is
// forgiven when what it was deleting is gone all the same: a provision
// killed half-way leaves its userdel running, and it may finish first.
func (s *System) goneAnyway(err error, stillThere func(etcDB) bool) (etcDB, error) {
	db, rerr := readEtc(s.EtcDir)
	switch {
	case rerr != nil:
		return db, rerr
	case err != nil && stillThere(db):
		return db, err
	}
	return db, nil
}

// RemoveAll deletes the drop-in, every flock account, their groups and the
// shared group (when it holds nothing but flock's agents).
func (s *System) RemoveAll(ctx context.Context) error {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return err
	}
	sharedOurs := s.dropInNamesGroup(spec.SharedGroup) || func() bool {
		g, ok := db.group(spec.SharedGroup)
		return ok && db.sharedGroupOurs(g)
	}()
	if err := fsutil.RemoveWithDir(s.SysusersPath); err != nil {
		return err
	}
	var names []string
	for _, a := range db.accounts() {
		names = append(names, a.Name)
	}
	if err := s.deleteAccounts(ctx, names); err != nil || !sharedOurs {
		return err
	}
	if db, err = readEtc(s.EtcDir); err != nil {
		return err
	}
	if _, ok := db.group(spec.SharedGroup); ok {
		err := run(ctx, "groupdel", spec.SharedGroup)
		_, err = s.goneAnyway(err, func(db etcDB) bool { _, ok := db.group(spec.SharedGroup); return ok })
		return err
	}
	return nil
}

// dropFromSysusers rewrites the drop-in without the u and m lines of names.
func (s *System) dropFromSysusers(names []string) error {
	data, err := os.ReadFile(s.SysusersPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, n := range names {
		gone[n] = true
	}
	var keep []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "u" || f[0] == "m") && gone[f[1]] {
			continue
		}
		keep = append(keep, line)
	}
	return renameio.WriteFile(s.SysusersPath, []byte(strings.Join(keep, "")), 0o644, renameio.WithStaticPermissions(0o644))
}

func (s *System) dropInNamesGroup(name string) bool {
	data, err := os.ReadFile(s.SysusersPath)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "g" && f[1] == name {
			return true
		}
	}
	return false
}

// SameGroups reports whether a and b name the same groups, in any order.
func SameGroups(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// run runs a command and wraps its failure with what it said.
func run(ctx context.Context, argv ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
