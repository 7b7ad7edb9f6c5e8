// Package golden compares generated artifacts (unit properties, nft rules,
// the sysusers.d drop-in) with files under testdata/, so a reviewer sees
// every change to them in the diff. `go test ./PKG -update` rewrites them.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ instead of comparing")

// Update reports whether this run rewrites golden files.
func Update() bool { return *update }

// Check compares got with the file at path, or rewrites it under -update.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		Write(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if the change is meant, then review the diff):\n%s", path, LineDiff(string(want), got))
	}
}

// Write writes got to the file at path, making its directory.
func Write(t testing.TB, path, got string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
}

// LineDiff lists the lines that differ, enough to see what changed.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  - %s\n  + %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
