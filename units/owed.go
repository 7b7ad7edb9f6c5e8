package units

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A restart owed: provision marks a running static unit before it
// installs the changed file the unit must restart onto, and the restart
// clears the mark. A run killed between the two leaves the unit running
// its former file under a file that looks done; the mark tells the next
// run to restart it. The marks live in /run: a reboot starts every unit
// from its file anyway.

// DefaultOwedDir is where the marks are, one empty file per unit.
const DefaultOwedDir = "/run/flockctl-restart-owed"

func (s *Systemd) owedPath(name string) string {
	dir := s.OwedDir
	if dir == "" {
		dir = DefaultOwedDir
	}
	return filepath.Join(dir, name)
}

func (s *Systemd) OweRestart(ctx context.Context, name string) error {
	if err := checkStarted(name); err != nil {
		return err
	}
	path := s.owedPath(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("marking %s's restart owed: %w", name, err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return fmt.Errorf("marking %s's restart owed: %w", name, err)
	}
	return nil
}

// owed says whether name's restart is owed.
func (s *Systemd) owed(name string) (bool, error) {
	_, err := os.Lstat(s.owedPath(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("reading %s's restart mark: %w", name, err)
}

// paid clears name's mark: it restarted, or is gone. The directory goes
// with its last mark.
func (s *Systemd) paid(name string) error {
	path := s.owedPath(name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clearing %s's restart mark: %w", name, err)
	}
	os.Remove(filepath.Dir(path)) // not empty: another unit's mark
	return nil
}
