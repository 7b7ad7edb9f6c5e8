package tier

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records what the tier rule does to a test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()        {}
func (f *fakeTB) Fatal(a ...any) { f.fatal = fmt.Sprint(a...) }
func (f *fakeTB) Skip(a ...any)  { f.skip = fmt.Sprint(a...) }

// Tier: unit.
func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ci        string
		ok        bool
		skip, die bool
	}{
		{"met outside CI", "", true, false, false},
		{"met in CI", "true", true, false, false},
		{"missing outside CI skips", "", false, true, false},
		{"missing in CI fails", "true", false, false, true},
		{"CI must say true", "1", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			f := &fakeTB{TB: t}
			Require(f, "needs a thing", tc.ok)
			if (f.skip != "") != tc.skip || (f.fatal != "") != tc.die {
				t.Errorf("skip %q fatal %q, want skip %v fatal %v", f.skip, f.fatal, tc.skip, tc.die)
			}
			for _, msg := range []string{f.skip, f.fatal} {
				if msg != "" && !strings.Contains(msg, "needs a thing") {
					t.Errorf("message %q lost the reason", msg)
				}
			}
		})
	}
}

// Tier: unit.
func TestRequireNeedsNamesEveryMissingOneWithItsFix(t *testing.T) {
	t.Setenv("CI", "true")
	have := Check("a", "never shown", func() error { return nil })
	lackB := Check("b", "install b", func() error { return errors.New("no b") })
	lackC := Program("flock-no-such-program", "flock-no-such-package")
	f := &fakeTB{TB: t}
	RequireNeeds(f, "demo", have, lackB, lackC)
	for _, want := range []string{"tier demo", "b: no b (install b)", "flock-no-such-program on PATH",
		"apt-get install flock-no-such-package"} {
		if !strings.Contains(f.fatal, want) {
			t.Errorf("failure %q lacks %q", f.fatal, want)
		}
	}
	if strings.Contains(f.fatal, "never shown") {
		t.Errorf("failure %q names a need that is met", f.fatal)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("four"), 0o644); err != nil {
		t.Fatal(err)
	}
	f = &fakeTB{TB: t}
	RequireNeeds(f, "demo", have, File(file, 4, "x"))
	if f.fatal != "" || f.skip != "" {
		t.Errorf("all met: skip %q fatal %q", f.skip, f.fatal)
	}
	if err := File(file, 5, "x").Missing(); err == nil || !strings.Contains(err.Error(), "want at least") {
		t.Errorf("a too-small file: %v", err)
	}
}

// Tier: unit.
func TestPrints(t *testing.T) {
	if err := Prints("a shell that says hi", "x", "hi", "sh", "-c", "echo hi there").Missing(); err != nil {
		t.Errorf("met: %v", err)
	}
	if err := Prints("a shell that says hi", "install a friendlier shell", "hi", "sh", "-c", "echo bye").Missing(); err == nil ||
		!strings.Contains(err.Error(), "does not list hi") || !strings.Contains(err.Error(), "install a friendlier shell") {
		t.Errorf("unmet: %v", err)
	}
	if err := Prints("a program", "x", "y", "flock-no-such-program").Missing(); err == nil {
		t.Errorf("a missing program: no error")
	}
}
