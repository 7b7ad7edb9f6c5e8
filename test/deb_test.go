package test

// Tier: package (make deb, lintian). The package as a reviewer and as
// Debian's checker read it; TestVMPackage installs it.

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/test/harness"
)

// TestDebManifest: the package's control fields and files are the
// reviewed ones (testdata/deb.golden).
func TestDebManifest(t *testing.T) {
	harness.PackageTier.Require(t)
	golden.Check(t, "testdata/deb.golden", debManifest(t, harness.Deb(t)))
}

// debManifest is what a reviewer checks of a package: its control fields
// but the version and size, and each file's mode, owner and path, but the
// man page and the CLI reference page of each verb (one per verb of the
// command tree, TestManPages: a new verb needs no change here) and the license files of each Go
// package (a new dependency neither: make licenses-check judges it, and
// licenses/report.csv, listed, names them all).
func debManifest(t *testing.T, deb string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"Package", "Architecture", "Section", "Priority", "Maintainer", "Homepage", "Depends", "Suggests", "Description"} {
		v, err := harness.DebField(deb, f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %s\n", f, v)
	}
	out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
	}
	b.WriteString("\n")
	const licenses = "./usr/share/doc/flock/licenses/"
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l) // mode owner size date time path
		if len(f) != 6 || strings.HasPrefix(f[5], "./usr/share/man/man1/flockctl-") || strings.HasPrefix(f[5], "./usr/share/doc/flock/docs/cli/flockctl_") ||
			strings.HasPrefix(f[5], licenses) && f[5] != licenses && f[5] != licenses+"report.csv" && f[5] != licenses+"go/LICENSE" {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s\n", f[0], f[1], f[5])
	}
	return b.String()
}

// lintianTag is one line of lintian's report: severity (O: overridden),
// package, tag.
var lintianTag = regexp.MustCompile(`^([EWIPXO]): flock: (\S+)`)

// TestDebLintian runs lintian on the package make deb builds, pedantic:
// any error or warning fails, but those packaging/lintian-overrides keeps
// (each explained there). Info, pedantic and experimental tags are
// logged, for a reviewer.
func TestDebLintian(t *testing.T) {
	lintian := harness.PackageTier.Tool(t, "lintian")
	deb := harness.Deb(t)
	out, err := exec.Command(lintian, "--pedantic", "--display-experimental", "--show-overrides", "--fail-on", "none", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("lintian %s: %v\n%s", deb, err, out)
	}
	var failed []string
	for _, l := range strings.Split(string(out), "\n") {
		m := lintianTag.FindStringSubmatch(l)
		switch {
		case m == nil:
		// An override that matches nothing any more is stale: its
		// explanation no longer says why anything is kept.
		case m[1] == "E" || m[1] == "W" || m[2] == "unused-override" || m[2] == "mismatched-override":
			failed = append(failed, l)
		default:
			t.Log(l)
		}
	}
	if len(failed) > 0 {
		t.Errorf("lintian: %d errors and warnings not overridden, or stale overrides:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	if !strings.Contains(string(out), "O: flock: statically-linked-binary") {
		t.Errorf("lintian shows no override in use (O:): did it read packaging/lintian-overrides?\n%s", out)
	}
}
