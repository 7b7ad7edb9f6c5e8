package test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// freshScript is what a new user does, in the README's order: make (the
// one package the README asks for besides Go), then `make demo`, then
// CI's own set-up, which runs `make preflight` in place of `make test`.
// Each step's time is printed for the test's log.
const freshScript = `set -euo pipefail
step() { local t0=$(date +%s); "$@"; echo "FRESH-STEP $(( $(date +%s) - t0 ))s: $*"; }
step bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends make'
step make demo
step bash .ci/run preflight
`

// TestFreshMachine runs the README's two commands on a fresh Debian 12
// (debootstrap --variant=minbase from the host's mirror) with nothing but
// Go: `make demo`, then `.ci/run preflight`, which installs what .ci/run
// installs, runs make deps and then make preflight (every tier's needs,
// and the tools tier: the Vagrantfile in every provider situation and the
// Ansible role). A command or test that leans on something this machine
// happened to have fails there first: this would have caught the
// Vagrantfile check that passed only where a provider plugin had been
// installed by hand. The tiers that boot machines run on the host
// (make test-system, make test-vm) after the preflight proved their needs.
//
// Tier: root + nspawn + debootstrap (harness.FreshTier).
func TestFreshMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every tier's packages on a fresh machine: not with -short")
	}
	harness.FreshTier.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "fresh.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = harness.RunFresh(ctx, harness.FreshOptions{
		Src:  harness.InRepo(t),
		Argv: []string{"bash", "-c", freshScript},
		Out:  out,
		Log:  harness.TestLog(t),
	})
	b, _ := os.ReadFile(logPath)
	for _, m := range regexp.MustCompile(`(?m)^FRESH-STEP .*$`).FindAllString(string(b), -1) {
		t.Log(m)
	}
	if err != nil {
		t.Fatalf("%v\nits output ends:\n%s", err, harness.TailLines(string(b), 80))
	}
	// The run's own words, so a step that ran nothing cannot pass.
	for _, want := range []string{
		"HELLO FROM THE FLOCK", "nothing to do: 3 agents match the spec", // the demo's task and its second provision
		"--- PASS: TestPreflight", "--- PASS: TestVagrantfileValidates",
		"--- PASS: TestAnsiblePlaybookSyntax", "--- PASS: TestAnsibleSpecTemplate",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the fresh machine's run lacks %q; its output ends:\n%s", want, harness.TailLines(string(b), 40))
		}
	}
}
