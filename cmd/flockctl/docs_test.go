package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockrun/flock/internal/golden"
)

// cliDocs is the CLI reference in the repository, which make docs writes.
const cliDocs = "../../docs/cli"

// Tier: unit. The CLI reference (docs/cli) is what the commands generate:
// a flag, a verb or a help text changed without make docs fails here.
func TestCLIReferenceIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if _, err := runRoot(t, "man", "--markdown", dir); err != nil {
		t.Fatal(err)
	}
	made, _ := filepath.Glob(filepath.Join(dir, "flockctl*.md"))
	kept, _ := filepath.Glob(filepath.Join(cliDocs, "flockctl*.md"))
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if len(made) < 12 {
		t.Fatalf("the commands made %d pages: %q", len(made), names(made))
	}
	if !slices.Equal(names(made), names(kept)) {
		t.Fatalf("docs/cli has the pages %q, the commands make %q: run make docs", names(kept), names(made))
	}
	for _, p := range made {
		want, _ := os.ReadFile(filepath.Join(cliDocs, filepath.Base(p)))
		got, _ := os.ReadFile(p)
		if string(got) != string(want) {
			t.Errorf("docs/cli/%s is not what the commands make (run make docs):\n%s", filepath.Base(p), golden.LineDiff(string(want), string(got)))
		}
	}
}
