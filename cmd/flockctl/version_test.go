package main

// Tier: unit (no root).

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/internal/version"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVersionCommand(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		check   func(string) bool
		wantErr string
	}{
		{[]string{"version"}, func(s string) bool { return strings.HasPrefix(s, "flockctl ") && strings.Contains(s, "(commit ") }, ""},
		{[]string{"version", "-o", "json"}, func(s string) bool {
			var in version.Info
			return json.Unmarshal([]byte(s), &in) == nil && in == version.Get("flockctl")
		}, ""},
		{[]string{"version", "--output", "yaml"}, nil, `--output "yaml": choose text or json`},
		{[]string{"version", "extra"}, nil, "unknown command"},
	} {
		out, err := runRoot(t, tc.args...)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.wantErr)
			}
		case err != nil || !tc.check(out):
			t.Errorf("%q: %q, %v", tc.args, out, err)
		}
	}
}

// The man pages make deb packages: one per verb, none for the hidden man
// command itself, which --help does not list either.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if _, err := runRoot(t, "man", dir); err != nil {
		t.Fatal(err)
	}
	// One page per visible command of the tree, named by its path.
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRoot()
	root.InitDefaultCompletionCmd() // as Execute does
	walk(root)
	if len(want) < 12 {
		t.Fatalf("the command tree has %d visible commands: %q", len(want), want)
	}
	for _, page := range want {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil || !bytes.Contains(b, []byte(`.TH "FLOCKCTL" "1"`)) {
			t.Errorf("%s: %v\n%s", page, err, b)
		}
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "*.1")); len(got) != len(want) {
		t.Errorf("%d pages, want %d (%q)", len(got), len(want), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "flockctl-man.1")); err == nil {
		t.Error("the hidden man command has a man page")
	}
	if help, _ := runRoot(t, "--help"); strings.Contains(help, "\n  man ") {
		t.Errorf("--help lists the man command:\n%s", help)
	}
}
