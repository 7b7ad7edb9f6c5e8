package main

// Tier: unit (no root, no systemd). flockctl plan run in-process against
// an empty host and a host state saved from the planner's fakes.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/plan/plantest"
	"github.com/flockrun/flock/spec"
)

const (
	twoAgents   = "agents:\n  - id: 1\n  - id: 2\n"
	threeAgents = twoAgents + "  - id: 3\n"
)

// savedState is the state of fake host provisioned with specText, as
// flockctl state save writes it, in a file.
func savedState(t *testing.T, specText string) string {
	t.Helper()
	ctx := context.Background()
	f, err := spec.Parse([]byte(specText))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := plantest.Provisioned(t, f)
	st, err := plan.Read(ctx, h, plan.FlockPaths(f))
	if err != nil {
		t.Fatal(err)
	}
	data, err := plan.EncodeHostState(st)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "host.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeSpec(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flock.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The exit code says whether the host matches (0), has changes pending
// (2) or could not be planned (1); stdout is provision --dry-run's lines.
func TestPlanExitCodes(t *testing.T) {
	state := savedState(t, twoAgents)
	garbage := writeSpec(t, "not a state")
	for _, tc := range []struct {
		name    string
		args    []string
		code    exitCode
		out     string // stdout holds it
		wantErr string // the error holds it
	}{
		{"an empty host", []string{"-f", writeSpec(t, twoAgents)}, exitPending, "create user      flock-1 (uid 2000000001)\n", ""},
		{"the host as the spec", []string{"-f", writeSpec(t, twoAgents), "--state", state}, exitOK, "nothing to do: the host matches the spec\n", ""},
		{"an agent more", []string{"-f", writeSpec(t, threeAgents), "--state", state}, exitPending, "start unit       flock-agent@3.service (not running)\n", ""},
		{"--agents N", []string{"--agents", "2", "--state", state}, exitOK, "nothing to do", ""},
		{"a bad spec", []string{"-f", writeSpec(t, "agents:\n  - id: 0\n")}, exitError, "", "agents[0].id"},
		{"no spec", nil, exitError, "", "no spec: give -f FILE"},
		{"a state that is not there", []string{"--agents", "1", "--state", state + ".none"}, exitError, "", "--state: open "},
		{"a state that is not one", []string{"--agents", "1", "--state", garbage}, exitError, "", "not a host state flockctl state save wrote"},
		{"several hosts, none named", []string{"-f", writeSpec(t, twoHosts)}, exitError, "", "planned one host at a time: name it with --host (choose a, b)"},
		{"several hosts, one named", []string{"-f", writeSpec(t, twoHosts), "--host", "b"}, exitPending, "start unit       flock-agent@2.service (not running)\n", ""},
		{"an unknown output", []string{"--agents", "1", "-o", "yaml"}, exitError, "", `--output "yaml": choose text or json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newRoot()
			root.SetOut(&out)
			root.SetErr(&errOut)
			root.SetArgs(append([]string{"plan"}, tc.args...))
			err := root.Execute()
			if code, _ := exitFor(err); code != tc.code {
				t.Errorf("exit %d, want %d (error %v)\n%s", code, tc.code, err, out.String())
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stdout lacks %q:\n%s", tc.out, out.String())
			}
		})
	}
}

// --output json is a stable shape: testdata/plan.json (go test
// ./cmd/flockctl -run PlanJSON -update rewrites it).
func TestPlanJSON(t *testing.T) {
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"plan", "-f", writeSpec(t, threeAgents+"    egress: [\"api.example.com:443\"]\n"), "--state", savedState(t, twoAgents), "-o", "json"})
	if code, _ := exitFor(root.Execute()); code != exitPending {
		t.Fatalf("exit %d, want %d", code, exitPending)
	}
	golden.Check(t, "testdata/plan.json", out.String())
}

// main prints the error of a failed verb, and nothing of a code a verb
// returns on purpose.
func TestExitFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code exitCode
		say  bool
	}{
		{nil, exitOK, false},
		{exitPending, exitPending, false},
		{os.ErrNotExist, exitError, true},
	} {
		if code, say := exitFor(tc.err); code != tc.code || say != tc.say {
			t.Errorf("exitFor(%v) = %d, %v; want %d, %v", tc.err, code, say, tc.code, tc.say)
		}
	}
}

// --version prints what flockctl version prints.
func TestVersionFlag(t *testing.T) {
	flag, err := runRoot(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	verb, err := runRoot(t, "version")
	if err != nil || flag != verb {
		t.Errorf("--version printed %q, version %q (%v)", flag, verb, err)
	}
}
