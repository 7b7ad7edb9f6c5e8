package proxyd

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flockrun/flock/internal/fsutil"
)

// maxHandOver bounds a handed-over credential, as the secrets' material
// is bounded where root reads it.
const maxHandOver = 1 << 20

// credentials are the unit's: systemd's (dir, read at start), and those
// root handed over at a reload since (spec.HandOverDir), which stand in
// for them. Those are kept in memory alone: a restart reads the files
// anew through systemd.
type credentials struct {
	dir    string
	handed map[string][]byte
}

// read is the credential name's content.
func (c credentials) read(name string) ([]byte, error) {
	if b, ok := c.handed[name]; ok {
		return b, nil
	}
	return os.ReadFile(filepath.Join(c.dir, name))
}

// with is c and the credentials in taken, which replace its own.
func (c credentials) with(taken map[string][]byte) credentials {
	handed := maps.Clone(c.handed)
	if handed == nil {
		handed = map[string][]byte{}
	}
	maps.Copy(handed, taken)
	return credentials{dir: c.dir, handed: handed}
}

// makeHandOver makes the hand-over directory, its own (0700).
func makeHandOver(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the hand-over directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("the hand-over directory: %w", err)
	}
	return nil
}

// handedOver reads what root handed over in dir, by name: each regular
// file, root's or this process's uid's, of at most maxHandOver bytes.
// Anything else is refused (warned of, left). A name starting with a
// dot is a file root is still writing.
func handedOver(dir string, warn func(string, ...any)) map[string][]byte {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		warn("the hand-over directory: %v; nothing is taken from it", err)
		return nil
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := readHandedOver(filepath.Join(dir, e.Name()))
		if err != nil {
			warn("hand-over %s refused: %v", e.Name(), err)
			continue
		}
		out[e.Name()] = b
	}
	return out
}

func readHandedOver(path string) ([]byte, error) {
	b, fi, err := fsutil.ReadRegular(path, maxHandOver)
	if err != nil {
		return nil, err
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 && int(uid) != os.Getuid() {
		return nil, fmt.Errorf("%s is uid %d's, neither root's nor this proxy's", path, uid)
	}
	return b, nil
}

// removeTaken removes what was taken: root sees it is in force.
func removeTaken(dir string, taken map[string][]byte, warn func(string, ...any)) {
	for name := range taken {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			warn("hand-over %s taken, not removed: %v", name, err)
		}
	}
}
