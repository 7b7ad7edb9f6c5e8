package fsutil

// Tier: unit.

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveWithDir(t *testing.T) {
	for _, tc := range []struct {
		name       string
		file, more bool // the file, and another file beside it
		wantDir    bool // its directory is still there after
	}{
		{"the file alone: its directory goes too", true, false, false},
		{"another file beside it: the directory stays", true, true, true},
		{"no file: an empty directory is not ours to remove", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "flock")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "bus.json")
			if tc.file {
				os.WriteFile(p, []byte("{}"), 0o644)
			}
			if tc.more {
				os.WriteFile(filepath.Join(dir, "flock.yaml"), nil, 0o644)
			}
			if err := RemoveWithDir(p); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s still there: %v", p, err)
			}
			if _, err := os.Stat(dir); (err == nil) != tc.wantDir {
				t.Errorf("directory there: %v, want %v", err == nil, tc.wantDir)
			}
		})
	}
	if err := RemoveWithDir(filepath.Join(t.TempDir(), "none", "x")); err != nil {
		t.Errorf("a file in a missing directory: %v", err)
	}
}
