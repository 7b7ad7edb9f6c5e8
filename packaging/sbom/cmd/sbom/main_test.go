package main

// Unit tier.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/packaging/sbom"
)

// TestRun: each missing flag is named with its fix, and a run on a Go
// program (this test's own) writes a BOM that Decode reads.
func TestRun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "bom.cdx.json")
	notes := filepath.Join(dir, "notes")
	if err := os.WriteFile(notes, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		err  string // "" succeeds
	}{
		{[]string{"-epoch", "0", "-o", out, self}, "-version is required"},
		{[]string{"-version", "1.0.0", "-o", out, self}, "-epoch is required"},
		{[]string{"-version", "1.0.0", "-epoch", "0", self}, "-o is required"},
		{[]string{"-version", "1.0.0", "-epoch", "0", "-o", out}, "name the programs"},
		{[]string{"-version", "1.0.0", "-epoch", "0", "-o", out, notes}, "no Go build info"},
		{[]string{"-version", "1.0.0", "-epoch", "0", "-o", out, self}, ""},
	} {
		err := run(tc.args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("sbom %s: %v", strings.Join(tc.args, " "), err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("sbom %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bom, err := sbom.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if bom.Metadata.Component.Version != "1.0.0" || len(bom.Components) == 0 || bom.Components[0].Name != filepath.Base(self) {
		t.Errorf("the BOM written: %+v", bom)
	}
}
