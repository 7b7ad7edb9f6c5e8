// Package fsutil holds what flock's packages say about files alike.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
)

// TypeName names a file type for an operator: "symlink", "directory",
// "file" or "special file".
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}

// ReadRegular reads the regular file at path, of at most limit bytes,
// without following a symlink in its place (one would hand a root-only
// file's reader another's file) or blocking on a FIFO; fi is the file's
// as read (its mode and owner).
func ReadRegular(path string, limit int64) (b []byte, fi fs.FileInfo, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("%s is a symlink, not a file", path)
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, fmt.Errorf("%s is a %s, not a file", path, TypeName(fi.Mode()))
	}
	if b, err = io.ReadAll(io.LimitReader(f, limit+1)); err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, fi, err
}

// RemoveWithDir removes the file at p (absent is fine) and, when there was
// one, its directory if that is now empty: flock makes the directories of
// its files with them (/etc/flock, /etc/sysusers.d), and deprovision
// leaves nothing. A directory that holds anything else stays.
func RemoveWithDir(p string) error {
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	dir := filepath.Dir(p)
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("removing %s, left empty: %w", dir, err)
	}
	return nil
}

// WriteAtomic replaces path with data in mode perm exactly (not the old
// file's mode, not reduced by the umask): a reader sees the old file or the
// new one, never a part.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("creating a temporary file for %s: %w", path, err)
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing a temporary file for %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}
