package users

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/flockrun/flock/internal/fsutil"
)

// modeBits are the bits of a path flock sets and checks.
const modeBits = fs.ModePerm | fs.ModeSetgid | fs.ModeSetuid | fs.ModeSticky

// PathState reads path without following a symlink: a link where flock
// wants a directory is drift, never a way to reach somewhere else.
func (s *System) PathState(ctx context.Context, path string) (Path, bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Path{}, false, nil
	}
	if err != nil {
		return Path{}, false, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	p := Path{Path: path, Dir: fi.IsDir(), UID: st.Uid, GID: st.Gid, Mode: fi.Mode() & modeBits}
	if fi.Mode()&fs.ModeSymlink != 0 {
		p.Mode |= fs.ModeSymlink
		return p, true, nil
	}
	if p.Dir {
		if p.DefaultGroupRW, err = defaultGroupRW(path); err != nil {
			return p, true, err
		}
	}
	return p, true, nil
}

// EnsurePaths creates or repairs each path in order (parents come first).
// Something of the wrong type where a path should be is refused, not
// removed: it may be an operator's data.
func (s *System) EnsurePaths(ctx context.Context, paths []Path) error {
	for _, p := range paths {
		if err := ensurePath(p); err != nil {
			return err
		}
	}
	return nil
}

func ensurePath(p Path) error {
	fi, err := os.Lstat(p.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && p.Existing:
		return fmt.Errorf("%s is missing, and it is not made here: provision again", p.Path)
	case errors.Is(err, fs.ErrNotExist):
		if err := create(p); err != nil {
			return err
		}
	case err != nil:
		return err
	case fi.IsDir() != p.Dir || fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s exists but is a %s, not a %s: move it away and provision again", p.Path, fsutil.TypeName(fi.Mode()), fsutil.TypeName(wantType(p)))
	}
	// Owner before mode: chown clears setgid.
	if err := os.Lchown(p.Path, int(p.UID), int(p.GID)); err != nil {
		return err
	}
	if err := os.Chmod(p.Path, p.Mode); err != nil {
		return err
	}
	if p.DefaultGroupRW != nil {
		return setDefaultGroupRW(p.Path, *p.DefaultGroupRW)
	}
	return nil
}

func create(p Path) error {
	if p.Dir {
		// 0700 until owner and mode are set, so nobody gets in between.
		return os.Mkdir(p.Path, 0o700)
	}
	f, err := os.OpenFile(p.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func wantType(p Path) fs.FileMode {
	if p.Dir {
		return fs.ModeDir
	}
	return 0
}

// RemovePaths deletes each path and everything below it.
func (s *System) RemovePaths(ctx context.Context, paths []string) error {
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return nil
}
