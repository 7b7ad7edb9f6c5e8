package units

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
)

// BuildID identifies the program at path by the build id its linker wrote
// (Go's, else GNU's): it changes when the program does and costs a few
// reads, not a hash of the whole file. A unit that runs the program
// carries it, so replacing flockctl or flock-agent restarts what runs
// the old one.
func BuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading the build id of %s: %w", path, err)
	}
	defer f.Close()
	for _, name := range []string{".note.go.buildid", ".note.gnu.build-id"} {
		if s := f.Section(name); s != nil {
			data, err := s.Data()
			if err != nil {
				return "", fmt.Errorf("reading %s of %s: %w", name, path, err)
			}
			sum := sha256.Sum256(data)
			return hex.EncodeToString(sum[:6]), nil
		}
	}
	return "", fmt.Errorf("%s has no build id note", path)
}
