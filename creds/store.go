// Package creds keeps the bus credentials of a host: one user nkey seed
// per identity (each agent, the operator, the proxy, the reader) in a
// directory only root lists, behind Identities, with Fake beside Store. In a multi-host
// flock the agents' seeds are derived from the flock's secret. The bus
// server reads none of it: its config (package bus) holds public keys.
package creds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/spec"
)

// The identities that are not agents' (an agent's is spec.UserName, flock-N).
const (
	// OperatorName is the identity of flockctl (root): on the bus it may
	// say and hear anything.
	OperatorName = "operator"
	// ProxyName is the egress proxy's: on the bus it publishes its
	// decisions and model counts and answers what a task spent (its
	// grants are bus.ForFlock's).
	ProxyName = "proxy"
	// ReaderName is the read-only verbs' (status, usage, tasks, explain)
	// for the members of spec.ReadersGroup: its seed alone is theirs to
	// read (0640, handed over by users.ReaderPaths), and on the bus it
	// may ask and hear, never send, purge or answer (bus.ForFlock).
	ReaderName = "reader"
)

// Identities is the OS boundary of credentials; Store is the real one,
// Fake (fake.go) keeps them in memory for planner tests.
type Identities interface {
	Keys(ctx context.Context) (map[string]string, error)                           // name -> public key of every seed on disk
	Ensure(ctx context.Context, name string) (pub string, created bool, err error) // creates the seed if missing; never replaces a valid one, but a derived one that differs (created is then true)
	Remove(ctx context.Context, names []string) error                              // missing is not an error
	RemoveAll(ctx context.Context) error
}

// DefaultCredDir holds the seeds: root lists it, the readers' group may
// only pass through it to the reader's seed.
const DefaultCredDir = spec.CredDir // /var/lib/flock/creds

// DirMode is the credentials directory's: search, not list, for its
// group (spec.ReadersGroup, which users.ReaderPaths gives it).
const DirMode = 0o710

// seedExt names seed files; nothing else in the directory is a seed.
const seedExt = ".nk"

// Store keeps one user nkey seed per name in Dir: the directory DirMode,
// each <name>.nk written root's 0600 (an agent's is then handed to it,
// 0400; the reader's to the readers' group, 0640)
// holding the seed and a newline, the format nats.NkeyOptionFromSeed and
// the nats CLI's --nkey read. With a Secret (a multi-host flock) the
// agents' seeds are derived from it (derived.go) and a different one on
// disk is replaced; without, every seed is random.
type Store struct {
	Dir    string
	Secret []byte // cluster.LoadSecret's; nil on one host
}

var _ Identities = Store{}

// Path is the seed file of name.
func (s Store) Path(name string) string { return filepath.Join(s.Dir, name+seedExt) }

// ValidName reports whether name is one flock gives identities to:
// flock-<id> (an agent id, no leading zeros), OperatorName, ProxyName or
// ReaderName. Nothing else can reach the file system through a name.
func ValidName(name string) bool {
	if name == OperatorName || name == ProxyName || name == ReaderName {
		return true
	}
	n, ok := strings.CutPrefix(name, "flock-")
	if !ok {
		return false
	}
	id, err := strconv.Atoi(n)
	return err == nil && id >= 1 && id <= spec.MaxID && spec.UserName(id) == name
}

func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%q is not an identity name (flock-<id>, %s, %s or %s)", name, OperatorName, ProxyName, ReaderName)
	}
	return nil
}

func (s Store) Keys(ctx context.Context) (map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys := map[string]string{}
	if err := s.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return keys, nil
	} else if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("listing credentials: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), seedExt)
		if !ok || !ValidName(name) {
			continue // not flock's: renameio's temporaries, someone's notes
		}
		pub, _, err := s.read(name)
		if err != nil {
			return nil, err
		}
		keys[name] = pub
	}
	return keys, nil
}

func (s Store) Ensure(ctx context.Context, name string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	if err := checkName(name); err != nil {
		return "", false, fmt.Errorf("ensuring a bus identity: %w", err)
	}
	if err := s.ensureDir(); err != nil {
		return "", false, err
	}
	if s.Secret != nil && Derived(name) {
		return s.ensureDerived(name)
	}
	pub, mode, err := s.read(name)
	if err == nil {
		if err := s.keepPrivate(name, mode); err != nil {
			return "", false, err
		}
		return pub, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", false, fmt.Errorf("creating the nkey of %s: %w", name, err)
	}
	defer kp.Wipe()
	seed, _ := kp.Seed()
	pub, _ = kp.PublicKey()
	if err := fsutil.WriteAtomic(s.Path(name), append(seed, '\n'), 0o600); err != nil {
		return "", false, fmt.Errorf("storing the nkey of %s: %w", name, err)
	}
	return pub, true, nil
}

// ensureDerived writes name's derived seed unless the file already holds
// it (then only its mode is repaired); created is true when it was
// missing or different, so the agent restarts with it.
func (s Store) ensureDerived(name string) (string, bool, error) {
	kp, err := derivedPair(s.Secret, name)
	if err != nil {
		return "", false, err
	}
	defer kp.Wipe()
	want, _ := kp.PublicKey()
	pub, mode, err := s.read(name)
	switch {
	case err == nil && pub == want:
		if err := s.keepPrivate(name, mode); err != nil {
			return "", false, err
		}
		return pub, false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errDamaged):
		return "", false, err // a symlink or a directory: refused, as for random seeds
	}
	seed, _ := kp.Seed()
	defer wipe(seed)
	if err := fsutil.WriteAtomic(s.Path(name), append(seed, '\n'), 0o600); err != nil {
		return "", false, fmt.Errorf("storing the nkey of %s: %w", name, err)
	}
	return want, true, nil
}

// Shared are the mode bits name's seed may have beyond its owner's: the
// group's read for the reader's (its group is the readers'), none for
// any other. An agent's seed is its own, 0400 (users.Seeds hands it
// over); readable by anyone else it is not a secret any more.
func Shared(name string) fs.FileMode {
	if name == ReaderName {
		return 0o040
	}
	return 0
}

// keepPrivate takes from name's seed every bit Shared does not allow.
func (s Store) keepPrivate(name string, mode fs.FileMode) error {
	if extra := mode & 0o077 &^ Shared(name); extra != 0 {
		if err := os.Chmod(s.Path(name), mode&^extra); err != nil {
			return fmt.Errorf("making the nkey of %s private: %w", name, err)
		}
	}
	return nil
}

func (s Store) Remove(ctx context.Context, names []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if err := checkName(name); err != nil {
			return fmt.Errorf("removing a bus identity: %w", err)
		}
	}
	if err := s.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.Remove(s.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the nkey of %s: %w", name, err)
		}
	}
	return nil
}

// RemoveAll removes the directory with every seed in it.
func (s Store) RemoveAll(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkDir(); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("removing credentials: %w", err)
	}
	return nil
}

// checkDir refuses anything but a real directory owned by us at Dir: a
// symlink could send seeds where an agent reads them.
func (s Store) checkDir() error {
	fi, err := os.Lstat(s.Dir)
	if err != nil {
		return fmt.Errorf("credentials directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("credentials directory %s is a %s, not a directory; remove it and provision again", s.Dir, fsutil.TypeName(fi.Mode()))
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		return fmt.Errorf("credentials directory %s belongs to uid %d, not %d; remove it and provision again", s.Dir, uid, os.Geteuid())
	}
	return nil
}

// ensureDir creates Dir DirMode or repairs its mode. Its group is root's
// until users.ReaderPaths hands it to the readers' group, which may then
// pass through to the one seed it may read.
func (s Store) ensureDir() error {
	if err := os.MkdirAll(filepath.Dir(s.Dir), 0o750); err != nil {
		return fmt.Errorf("creating the parent of the credentials directory: %w", err)
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the credentials directory: %w", err)
	}
	if err := s.checkDir(); err != nil {
		return err
	}
	// Chmod follows symlinks, but checkDir just refused one, and the parent is root's.
	if err := os.Chmod(s.Dir, DirMode); err != nil {
		return fmt.Errorf("making the credentials directory root's (%o): %w", DirMode, err)
	}
	return nil
}

// read returns the public key of name's seed and the file's mode,
// fs.ErrNotExist if there is none. O_NOFOLLOW: a symlink in place of a
// seed is refused, not followed; O_NONBLOCK: a fifo does not hang us.
func (s Store) read(name string) (string, fs.FileMode, error) {
	path := s.Path(name)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return "", 0, fmt.Errorf("nkey of %s: %s is a symlink; delete it and provision again", name, path)
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading the nkey of %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("reading the nkey of %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("nkey of %s: %s is a %s, not a file; delete it and provision again", name, path, fsutil.TypeName(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", 0, fmt.Errorf("reading the nkey of %s: %w", name, err)
	}
	defer wipe(data)
	damaged := fmt.Errorf("nkey of %s: %s is damaged (%w); delete it and provision again", name, path, errDamaged)
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return "", 0, damaged
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", 0, damaged
	}
	return pub, fi.Mode().Perm(), nil
}

// errDamaged is a seed file that holds no user seed: a derived one is
// simply written again, a random one is the operator's to delete.
var errDamaged = errors.New("not a user nkey seed")

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
