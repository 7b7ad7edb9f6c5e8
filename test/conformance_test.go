package test

// Tier: root + nspawn. The conformance suites of the boundaries whose
// real implementation needs a booted systemd (units.Manager) or a
// machine's own /etc (users.Host's accounts: systemd-sysusers, userdel),
// run against the real implementations inside a booted machine. Their
// fakes run the same suites in their packages' unit tests.
//
// This test binary re-runs itself inside the machine, as the agents'
// programs would run there: the real units.Connect on the machine's
// /run/systemd/private and users.NewHost on its /etc, with nothing of the
// host's in reach.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/units/unitstest"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/users/userstest"
)

// conformanceEnv names, inside the machine, the machine the suites may
// change; the copy of this binary there checks it is that machine before
// it touches systemd or /etc.
const conformanceEnv = "FLOCK_CONFORMANCE_MACHINE"

const conformanceBin = "flock-conformance.test"

func TestConformance(t *testing.T) {
	if name := os.Getenv(conformanceEnv); name != "" {
		conformanceInside(t, name)
		return
	}
	// Tier: root + nspawn.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := harness.BootWith(t, harness.Options{NoBinaries: true, Binaries: map[string]string{conformanceBin: exe}})
	ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
	defer cancel()
	t0 := time.Now()
	out, errOut, err := m.Run(ctx, "env", conformanceEnv+"="+m.Name(), "/usr/local/bin/"+conformanceBin,
		"-test.run=^TestConformance$", "-test.v", "-test.count=1")
	t.Logf("inside machine %s (%v):\n%s", m.Name(), time.Since(t0).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the suites failed inside the machine: %v\n%s", err, errOut)
	}
}

// conformanceInside runs the suites against the real implementations, in
// the machine named name.
func conformanceInside(t *testing.T, name string) {
	if host, err := os.Hostname(); err != nil || host != name {
		t.Fatalf("%s=%s, but this is %q (%v): the suites change systemd and /etc, run them only through TestConformance", conformanceEnv, name, host, err)
	}
	t.Run("units", func(t *testing.T) {
		unitstest.Run(t, func(t *testing.T) units.Manager {
			// Not a context with a deadline: the connection lives only as
			// long as the context Connect was given.
			m, err := units.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			return m
		})
	})
	t.Run("users accounts", func(t *testing.T) {
		userstest.Accounts(t, func(t *testing.T) users.Host { return users.NewHost() }, useradd)
	})
	t.Run("users paths", func(t *testing.T) {
		userstest.Paths(t, func(t *testing.T) (users.Host, string) {
			return users.NewHost(), filepath.Join(t.TempDir(), "flock")
		})
	})
	t.Run("users readers", func(t *testing.T) {
		userstest.Readers(t, func(t *testing.T) users.Host { return users.NewHost() }, groupadd)
	})
}

// groupadd makes the readers' group as an operator would, removed when t
// ends.
func groupadd(t *testing.T, _ users.Host, gid uint32) {
	t.Helper()
	if out, err := exec.Command("groupadd", "--gid", fmt.Sprint(gid), spec.ReadersGroup).CombinedOutput(); err != nil {
		t.Fatalf("groupadd %s: %v: %s", spec.ReadersGroup, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("groupdel", spec.ReadersGroup).CombinedOutput(); err != nil {
			t.Errorf("groupdel %s: %v: %s", spec.ReadersGroup, err, out)
		}
	})
}

// useradd makes a user as an operator would, removed when t ends.
func useradd(t *testing.T, _ users.Host, name string, uid uint32) {
	t.Helper()
	cmdOK := func(argv ...string) error {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	if err := cmdOK("useradd", "--uid", fmt.Sprint(uid), "--user-group", "--no-create-home",
		"--comment", "someone else's "+name, "--shell", "/usr/sbin/nologin", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmdOK("userdel", name); err != nil {
			t.Error(err)
		}
	})
}
