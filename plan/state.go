package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/spec"
)

// StateDir holds what flock must remember between runs.
const StateDir = spec.StateDir

// StatePath is the last applied flock: status, deprovision --all and
// (later) the boot-time reconcile read it.
var StatePath = filepath.Join(StateDir, "applied.json")

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
func SaveState(path string, f *spec.Flock) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(path, append(data, '\n'), 0o600, renameio.WithStaticPermissions(0o600))
}

// RemoveState forgets the applied flock (deprovision --all).
func RemoveState(dir string) error { return os.RemoveAll(dir) }
