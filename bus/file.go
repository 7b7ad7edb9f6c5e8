package bus

import (
	"fmt"
	"os"

	"github.com/google/renameio/v2"
)

// writeAtomic replaces path with data in mode perm exactly (not the old
// file's mode, not reduced by the umask): a reader sees the old file or the
// new one, never a part.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
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
