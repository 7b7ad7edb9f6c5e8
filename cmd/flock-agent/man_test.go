package main

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/internal/version"
)

// TestManModes: every command line the man page shows is read by
// parseArgs as the mode it is listed under, and every mode an operator
// may give is listed.
// Tier: unit (no root).
func TestManModes(t *testing.T) {
	var listed []mode
	for _, m := range modes {
		inv, err := parseArgs(m.args)
		if err != nil || inv.mode != m.mode {
			t.Errorf("the man page's %q: parseArgs says %+v, %v; want mode %s", m.args, inv, err, m.mode)
		}
		listed = append(listed, m.mode)
	}
	for _, m := range []mode{modeDefault, modeTask, modeExec, modeVersion} {
		if !slices.Contains(listed, m) {
			t.Errorf("mode %s is not in the man page", m)
		}
	}
}

// TestManEnvironment: the page's ENVIRONMENT is agent.Env's variables,
// no more and no fewer (FLOCK_ENV comes with spec variables;
// CREDENTIALS_DIRECTORY is systemd's, which FromEnv reads too).
// Tier: unit (no root).
func TestManEnvironment(t *testing.T) {
	want := []string{"CREDENTIALS_DIRECTORY"}
	for _, kv := range (agent.Env{ID: 1, Extra: []string{"X=1"}}).Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "X" {
			want = append(want, name)
		}
	}
	var got []string
	for _, e := range environment {
		got = append(got, e.name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the man page lists %q, agent.Env has %q", got, want)
	}
}

// TestManPage: the page man renders without a warning (lintian runs the
// same check on the package), dated by the build and naming every mode.
// Tier: unit, man (Debian's man-db).
func TestManPage(t *testing.T) {
	var b bytes.Buffer
	if err := writeMan(&b, version.Info{Version: "1.2.3", Date: "2026-11-27T12:36:19Z"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`.TH "FLOCK-AGENT" "1" "Nov 2026" "flock 1.2.3"`, `\fBtask\fR \fB\-\-\fR \fICOMMAND\fR`, ".B FLOCK_JIT\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q in:\n%s", want, page)
		}
	}
	tier.RequireNeeds(t, "unit, man", tier.Program("man", "man-db"))
	cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", "-")
	cmd.Stdin = strings.NewReader(page)
	cmd.Env = append(cmd.Environ(), "LC_ALL=C.UTF-8", "MANWIDTH=80")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || errOut.Len() > 0 {
		t.Errorf("man --warnings: %v\n%s", err, errOut.String())
	}
}
