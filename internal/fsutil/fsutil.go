// Package fsutil holds what flock's packages say about files alike.
package fsutil

import (
	"errors"
	"fmt"
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
