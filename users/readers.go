package users

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/spec"
)

// ReadersSysusersPath is the drop-in of the readers' group, apart from
// the agents' (SysusersPath): written only when flock creates the group,
// it is the record that the group is flock's to remove, and it makes
// systemd-sysusers keep the group at boot. deprovision --all keeps both
// (the group's members are people an operator added); --purge removes
// them.
const ReadersSysusersPath = "/etc/sysusers.d/flock-readers.conf"

// RenderReadersSysusers is ReadersSysusersPath's text: a system group,
// its gid the host's choice.
func RenderReadersSysusers() string {
	return "# Written by flockctl provision: flock made this group, and deprovision --all --purge removes it.\n" +
		"g " + spec.ReadersGroup + " -\n"
}

// ReaderPaths are what a member of the readers' group reads, handed to
// the group: flock's state directory and the credentials directory (to
// pass through, not to list) and the reader's bus seed. The state file
// inside (plan.StatePath) takes its directory's group as it is written.
// Every other seed stays its owner's alone (creds.Shared).
func ReaderPaths() []Path {
	return []Path{
		{Path: spec.StateDir, Dir: true, Mode: 0o750, Group: spec.ReadersGroup},
		{Path: spec.CredDir, Dir: true, Mode: 0o710, Group: spec.ReadersGroup},
		{Path: spec.CredPath(creds.ReaderName), Mode: 0o640, Group: spec.ReadersGroup, Existing: true},
	}
}

// WithGroup is paths with the gid of each that names group set to gid.
func WithGroup(paths []Path, group string, gid uint32) []Path {
	out := make([]Path, len(paths))
	for i, p := range paths {
		if p.Group == group {
			p.GID = gid
		}
		out[i] = p
	}
	return out
}

func (s *System) readersPath() string {
	if s.ReadersSysusersPath != "" {
		return s.ReadersSysusersPath
	}
	return filepath.Join(filepath.Dir(s.SysusersPath), filepath.Base(ReadersSysusersPath))
}

func (s *System) Readers(ctx context.Context) (uint32, bool, error) {
	db, err := readEtc(s.EtcDir)
	if err != nil {
		return 0, false, err
	}
	g, ok := db.group(spec.ReadersGroup)
	return g.GID, ok, nil
}

// EnsureReaders has systemd-sysusers create the group from its own
// drop-in, which is written only when the group is missing: a group an
// operator made stays theirs.
func (s *System) EnsureReaders(ctx context.Context) (uint32, error) {
	if gid, ok, err := s.Readers(ctx); err != nil || ok {
		return gid, err
	}
	path := s.readersPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	if err := renameio.WriteFile(path, []byte(RenderReadersSysusers()), 0o644, renameio.WithStaticPermissions(0o644)); err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := run(ctx, "systemd-sysusers", path); err != nil {
		return 0, err
	}
	gid, ok, err := s.Readers(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("systemd-sysusers %s did not create group %s", path, spec.ReadersGroup)
	}
	return gid, err
}

// RemoveReaders deletes the group, then its drop-in: a removal cut short
// leaves the record, and the next one finishes it.
func (s *System) RemoveReaders(ctx context.Context) error {
	path := s.readersPath()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil // not flock's
	} else if err != nil {
		return err
	}
	if _, ok, err := s.Readers(ctx); err != nil {
		return err
	} else if ok {
		err := run(ctx, "groupdel", spec.ReadersGroup)
		if _, err = s.goneAnyway(err, func(db etcDB) bool { _, ok := db.group(spec.ReadersGroup); return ok }); err != nil {
			return err
		}
	}
	// Its directory too, left empty, as RemoveAll leaves flock.conf's.
	return fsutil.RemoveWithDir(path)
}
