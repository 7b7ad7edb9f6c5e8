package creds

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/internal/fsutil"
)

// The hand-over: a secret's new value, or a model API's new key, reaches
// the running flock-proxy, whose LoadCredential= systemd reads at start
// alone, as a file in its RuntimeDirectory= (spec.ProxyHandOverPath),
// which it takes at its next reload. The directory is the proxy's dynamic
// uid's (0700) and goes at its stop, so nothing handed over outlives the
// process.

// handOverMode is a handed-over file's: its owner's, read-only.
const handOverMode = 0o400

func (m MaterialStore) HandOver(ctx context.Context, values map[string][]byte) error {
	fi, err := os.Lstat(m.HandOverDir)
	if err != nil {
		return fmt.Errorf("the proxy's hand-over directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the proxy's hand-over directory %s is a %s", m.HandOverDir, fsutil.TypeName(fi.Mode()))
	}
	st := fi.Sys().(*syscall.Stat_t)
	var written []string
	for name, v := range values {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, m.Withdraw(ctx, written))
		}
		if err := writeOwned(filepath.Join(m.HandOverDir, filepath.Base(name)), v, int(st.Uid), int(st.Gid)); err != nil {
			return errors.Join(err, m.Withdraw(ctx, written))
		}
		written = append(written, name)
	}
	return nil
}

// writeOwned writes path whole (a temporary file beside it, its name
// starting with a dot, renamed into place), handOverMode and owned by
// uid:gid before it is there.
func writeOwned(path string, data []byte, uid, gid int) error {
	t, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(handOverMode))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := t.Chown(uid, gid); err != nil {
		return fmt.Errorf("handing %s to uid %d: %w", path, uid, err)
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func (m MaterialStore) Untaken(ctx context.Context, names []string) ([]string, error) {
	var left []string
	for _, name := range names {
		_, err := os.Lstat(filepath.Join(m.HandOverDir, filepath.Base(name)))
		switch {
		case err == nil:
			left = append(left, name)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("the proxy's hand-over directory: %w", err)
		}
	}
	return left, nil
}

func (m MaterialStore) Withdraw(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		if err := os.Remove(filepath.Join(m.HandOverDir, filepath.Base(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("withdrawing a hand-over: %w", err))
		}
	}
	return errors.Join(errs...)
}
