package main

// Tier: unit (no root): deprovision on the fakes of every boundary shows
// what it will remove, then asks, removes without asking (--yes), or only
// shows (--dry-run); a refusal or a "no" changes nothing.

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/plan/plantest"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

func TestDeprovisionAsks(t *testing.T) {
	ctx := context.Background()
	three := spec.Flock{Agents: []spec.Agent{{ID: 3}}}
	for _, tc := range []struct {
		name     string
		all      bool
		yes, dry bool
		answer   string
		code     exitCode // of the error; exitOK: none
		err      string   // in the error
		removed  bool
		says     []string // on stdout
	}{
		{name: "y removes", answer: "y\n", removed: true,
			says: []string{"to remove from this host:\n  agent 3: its unit, user and group, bus identity and firewall rules\nkept (--purge deletes them):\n  keep /srv/flock/agents/3\n", "removed 1 agents; 2 remain"}},
		{name: "yes removes", answer: " YES \n", removed: true},
		{name: "n changes nothing", answer: "n\n", code: exitError, err: "nothing was changed", says: []string{"agent 3: its unit"}},
		{name: "no answer changes nothing", answer: "", code: exitError, err: "nothing was changed"},
		{name: "--yes does not ask", yes: true, removed: true},
		{name: "--dry-run shows", dry: true, code: exitPending, says: []string{"agent 3: its unit"}},
		{name: "--all y removes everything", all: true, answer: "y\n", removed: true,
			says: []string{"  agents 1-3: their units", "  table inet flock (every agent's firewall rules)\n", "  " + units.BusUnit + " (the bus)\n", "the record of the provisioned flock", "removed every flock unit"}},
		{name: "--all --dry-run shows", all: true, dry: true, code: exitPending, says: []string{"  agents 1-3: their units"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := spec.Count(3)
			if err != nil {
				t.Fatal(err)
			}
			h, fk := plantest.Provisioned(t, f)
			state := filepath.Join(t.TempDir(), "flock", "applied.json")
			if err := plan.SaveState(state, f); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			o := deprovisionOpts{stdio: stdio{in: strings.NewReader(tc.answer), out: &out, errOut: &errOut},
				all: tc.all, yes: tc.yes, dryRun: tc.dry, state: state}
			gone := &three
			if tc.all {
				gone = nil
			}
			err = deprovisionOn(ctx, o, h, gone)
			if code, _ := exitFor(err); code != tc.code || (tc.err != "" && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("exit %d (%v), want %d with %q\nstdout:\n%s", code, err, tc.code, tc.err, out.String())
			}
			if asked := strings.Contains(errOut.String(), "Remove this? [y/N] "); asked == (tc.yes || tc.dry) {
				t.Errorf("asked %v with --yes %v, --dry-run %v: %q", asked, tc.yes, tc.dry, errOut.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			sts, _ := fk.Units.List(ctx)
			if gone := len(sts) < 3; gone != tc.removed {
				t.Errorf("units left %v; want removed %v", sts, tc.removed)
			}
			if tc.removed {
				return
			}
			// Nothing changed: the host is still as provision left it.
			d := plan.Build(f, plan.Site{}, units.Options{})
			have, err := plan.Observe(ctx, h, d)
			if err != nil {
				t.Fatal(err)
			}
			if p := plan.Diff(d, have); !p.Empty() {
				t.Errorf("the host changed:\n%s", p)
			}
			if _, err := plan.LoadState(state); err != nil {
				t.Errorf("the state: %v", err)
			}
		})
	}
}

// Without a terminal to ask on and without --yes, deprovision refuses
// before it reads or changes the host (here, before it finds no systemd;
// one who is not root is told first that it is root's);
// --yes and --dry-run need no terminal.
func TestDeprovisionNeedsATerminalOrYes(t *testing.T) {
	noTTY := func(io.Reader) bool { return false }
	for _, tc := range []struct {
		o   deprovisionOpts
		err string
	}{
		{deprovisionOpts{all: true}, "stdin is not a terminal: pass --yes"},
		{deprovisionOpts{file: "flock.yaml", purge: true}, "pass --yes to remove without asking"},
		{deprovisionOpts{all: true, yes: true, dryRun: true}, "not both"},
		{deprovisionOpts{}, "give either -f FILE"},
	} {
		tc.o.terminal = noTTY
		want := tc.err
		if os.Geteuid() != 0 && strings.Contains(want, "--yes") {
			want = "must run as root" // asked before the terminal
		}
		if err := runDeprovision(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v; want %q", tc.o, err, want)
		}
	}
	for _, o := range []deprovisionOpts{{all: true, yes: true, terminal: noTTY}, {all: true, dryRun: true, terminal: noTTY}} {
		if err := o.check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
