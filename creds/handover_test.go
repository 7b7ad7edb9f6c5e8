package creds

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Unit tier (as root: the files are handed to another uid). The
// hand-over writes each value whole, 0400 and the directory owner's,
// with no temporary file left; a missing directory writes nothing; what
// is not taken is untaken until withdrawn.
func TestHandOver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("handing a file to another uid needs root")
	}
	ctx := context.Background()
	m := tempMaterial(t)
	values := map[string][]byte{"secret-github": []byte("ghp_x"), "secret-search": []byte("se-y")}
	if err := m.HandOver(ctx, values); err == nil || !strings.Contains(err.Error(), "hand-over directory") {
		t.Fatalf("no directory: %v", err)
	}
	if err := os.MkdirAll(m.HandOverDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(m.HandOverDir, 61234, 61234); err != nil {
		t.Fatal(err)
	}
	if err := m.HandOver(ctx, values); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(m.HandOverDir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %v; want the two files alone", entries)
	}
	for name, v := range values {
		p := filepath.Join(m.HandOverDir, name)
		b, err := os.ReadFile(p)
		fi, _ := os.Lstat(p)
		if err != nil || string(b) != string(v) || fi.Mode() != 0o400 || fi.Sys().(*syscall.Stat_t).Uid != 61234 {
			t.Errorf("%s: %q %v (%v); want %q, 0400, uid 61234", name, b, fi.Mode(), err, v)
		}
	}
	// The proxy takes one.
	os.Remove(filepath.Join(m.HandOverDir, "secret-github"))
	names := []string{"secret-github", "secret-search"}
	if left, err := m.Untaken(ctx, names); err != nil || !slices.Equal(left, []string{"secret-search"}) {
		t.Errorf("untaken %v, %v; want secret-search", left, err)
	}
	if err := m.Withdraw(ctx, names); err != nil {
		t.Fatal(err)
	}
	if left, err := m.Untaken(ctx, names); err != nil || len(left) != 0 {
		t.Errorf("withdrawn, untaken %v, %v", left, err)
	}
}
