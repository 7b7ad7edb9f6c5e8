// Package tier is the rule every test that needs more than Go follows
// (docs/design.md, "Test tiers"): a test whose tier the machine cannot
// provide is skipped on a developer's machine, and fails in CI (CI=true),
// where a skip would hide that the tier never ran. A tier's needs are
// listed as Needs, each with the fix, so a test and the preflight say
// exactly what is missing and how `make deps` gets it.
package tier

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Require skips t (fails it under CI=true) unless ok; reason says what
// the tier needs and why it is missing.
func Require(t testing.TB, reason string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if inCI() {
		t.Fatal(reason + " (CI=true: a tier CI should run is not skipped)")
		return
	}
	t.Skip(reason)
}

// inCI says whether this run is CI's, where no tier may be skipped.
func inCI() bool { return os.Getenv("CI") == "true" }

// Need is one thing a tier needs from the machine.
type Need struct {
	What  string       // what is needed, e.g. "systemd-nspawn on PATH"
	Fix   string       // how to get it, e.g. "apt-get install systemd-container"
	check func() error // nil when the machine has it
}

// Missing is nil when the machine has n, else what is missing and the fix.
func (n Need) Missing() error {
	err := n.check()
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %v (%s)", n.What, err, n.Fix)
}

// Check is a Need decided by check.
func Check(what, fix string, check func() error) Need {
	return Need{What: what, Fix: fix, check: check}
}

// Root is the need to run as root.
func Root(why string) Need {
	return Check("root", "run the tests as root: "+why, func() error {
		if uid := os.Geteuid(); uid != 0 {
			return fmt.Errorf("running as uid %d", uid)
		}
		return nil
	})
}

// Program is a program on PATH, from a Debian package.
func Program(name, pkg string) Need {
	return Built(name, "apt-get install "+pkg+"; make deps does")
}

// Built is a program on PATH that fix makes (a Go build, not a package).
func Built(name, fix string) Need {
	return Check(name+" on PATH", fix, func() error {
		_, err := exec.LookPath(name)
		return err
	})
}

// Prints is the need that argv runs and says want (a module, a plugin).
func Prints(what, fix, want string, argv ...string) Need {
	return Check(what, fix, func() error {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
		if !strings.Contains(string(out), want) {
			return fmt.Errorf("%s does not list %s", strings.Join(argv, " "), want)
		}
		return nil
	})
}

// File is a file a package installs, at least minSize bytes.
func File(path string, minSize int64, pkg string) Need {
	return Check(path, "apt-get install "+pkg+"; make deps does", func() error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if fi.Size() < minSize {
			return fmt.Errorf("%d bytes, want at least %d", fi.Size(), minSize)
		}
		return nil
	})
}

// Missing returns every need of needs the machine lacks, each with its fix.
func Missing(needs ...Need) error {
	var errs []error
	for _, n := range needs {
		if err := n.Missing(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RequireNeeds applies Require to needs, naming every missing one at once.
func RequireNeeds(t testing.TB, name string, needs ...Need) {
	t.Helper()
	err := Missing(needs...)
	if err == nil {
		return
	}
	Require(t, fmt.Sprintf("tier %s: the machine lacks\n  %s", name,
		strings.ReplaceAll(err.Error(), "\n", "\n  ")), false)
}
