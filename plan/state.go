package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/spec"
)

// StateDir holds what flock must remember between runs.
const StateDir = spec.StateDir

// StatePath is the last applied flock: status, deprovision --all and
// the boot-time reconcile read it, and so do the readers' group's verbs
// (it is theirs to read: StateMode). It holds the spec and nothing
// secret: a model API's key is named by its file, never copied, and an
// agent's env is not for secrets (every user can read it from systemd).
var StatePath = filepath.Join(StateDir, "applied.json")

// StateMode is StatePath's: root writes it, its directory's group (the
// readers', users.ReaderPaths) reads it.
const StateMode = 0o640

// ErrNoState means nothing was ever applied on this host.
var ErrNoState = errors.New("no flock has been provisioned on this host")

// LoadState reads the last applied flock.
func LoadState(path string) (*spec.Flock, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, err
	}
	var f spec.Flock
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v); provision again with your spec to rewrite it", path, err)
	}
	return &f, nil
}

// SaveState writes f atomically: a crash leaves the old state or the new.
// It is StateMode, with the group of its directory, before it is in place.
func SaveState(path string, f *spec.Flock) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	t, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(StateMode))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := t.Chown(-1, int(fi.Sys().(*syscall.Stat_t).Gid)); err != nil {
		return fmt.Errorf("handing %s to the group of %s: %w", path, dir, err)
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// RemoveState forgets the applied flock (deprovision --all).
func RemoveState(dir string) error { return os.RemoveAll(dir) }
