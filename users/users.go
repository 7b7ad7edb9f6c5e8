// Package users owns the Unix side of a flock: one system user and group per
// agent (through a sysusers.d drop-in and systemd-sysusers), the shared group,
// and the directory tree with its owners, modes and ACLs.
package users

import (
	"context"
	"errors"
	"io/fs"
)

// Account is one Unix user with a group of the same name and number.
type Account struct {
	Name    string // flock-3
	UID     uint32 // also the gid of its own group
	Home    string
	Comment string
	Groups  []string // supplementary groups, e.g. the shared "flock"
}

// Path is a directory or file flock owns, as it must be on the host.
type Path struct {
	Path string
	Dir  bool
	UID  uint32
	GID  uint32
	Mode fs.FileMode // permission bits plus setgid where wanted
	// DefaultGroupRW, when set on a directory, is the gid given rwX by a
	// default ACL, so files created inside stay shared whatever the umask.
	DefaultGroupRW *uint32
	// Existing is a file another part of flock makes (an agent's bus
	// seed): only its owner and mode are flock's here, it is never created.
	Existing bool
	// Group, when set, names the group whose gid GID must be: a group
	// whose gid the host picks (spec.ReadersGroup). plan fills GID in
	// from the host before it compares or ensures the path.
	Group string `json:",omitempty"`
}

// ErrNotOurs is returned when a name or uid flock wants is held by something
// flock did not create.
var ErrNotOurs = errors.New("held by something flock did not create")

// Host is the OS boundary of this package. The real one writes
// /etc/sysusers.d/flock.conf and runs systemd-sysusers, userdel, groupdel;
// Fake keeps state in memory for planner tests.
type Host interface {
	// Accounts lists flock's agent accounts present now, each with the
	// groups it is in.
	Accounts(ctx context.Context) ([]Account, error)
	// Claim reports (wrapping ErrNotOurs) every name or id these accounts
	// need that something other than flock holds. It changes nothing.
	Claim(ctx context.Context, shared Group, accounts []Account) error
	// EnsureAccounts makes the drop-in hold exactly these accounts plus the
	// shared group, and creates any that are missing. Idempotent.
	EnsureAccounts(ctx context.Context, shared Group, accounts []Account) error
	// RemoveAccounts deletes the named users and their groups, and drops them
	// from the drop-in. Names that do not exist are ignored.
	RemoveAccounts(ctx context.Context, names []string) error
	// RemoveAll deletes every flock account, the shared group and the drop-in.
	RemoveAll(ctx context.Context) error
	// PathState reads a path as it is now; ok is false when it does not exist.
	PathState(ctx context.Context, path string) (p Path, ok bool, err error)
	// EnsurePaths creates or repairs each path, parents first. Idempotent.
	EnsurePaths(ctx context.Context, paths []Path) error
	// RemovePaths deletes each path recursively. Missing paths are ignored.
	RemovePaths(ctx context.Context, paths []string) error
	// Readers is the gid of spec.ReadersGroup; ok is false when there is
	// no such group.
	Readers(ctx context.Context) (gid uint32, ok bool, err error)
	// EnsureReaders creates spec.ReadersGroup if it is missing, and
	// records that flock made it; a group of that name someone else made
	// is used as it is. Idempotent.
	EnsureReaders(ctx context.Context) (gid uint32, err error)
	// RemoveReaders deletes spec.ReadersGroup if flock made it, with
	// whoever is in it; one someone else made is kept. RemoveAll keeps
	// it either way: its members are people.
	RemoveReaders(ctx context.Context) error
}

// Group is the shared group every agent belongs to.
type Group struct {
	Name string
	GID  uint32
}
