package fsutil

// Tier: unit.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("12345678"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	fifo := filepath.Join(dir, "fifo")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		limit      int64
		want       string // the content, or the error's end
	}{
		{"a file within the limit", file, 8, "12345678"},
		{"a file over the limit", file, 7, file + " is larger than 7 bytes"},
		{"a symlink to it", link, 8, link + " is a symlink, not a file"},
		{"a FIFO, not waited on", fifo, 8, fifo + " is a special file, not a file"},
		{"nothing", filepath.Join(dir, "none"), 8, "no such file or directory"},
	} {
		b, _, err := ReadRegular(tc.path, tc.limit)
		got := string(b)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasSuffix(got, tc.want) || (err == nil) != (tc.want == "12345678") {
			t.Errorf("%s: %q, %v; want %q", tc.name, b, err, tc.want)
		}
	}
}
