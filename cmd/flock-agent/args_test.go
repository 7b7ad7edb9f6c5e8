package main

import (
	"slices"
	"strings"
	"testing"
)

// The command lines the unit uses, and what is refused.
// Tier: unit (no root).
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		mode    mode
		argv    []string
		wantErr bool
	}{
		{nil, modeDefault, nil, false},
		{[]string{"task", "--", "/usr/bin/jq", "-c", "."}, modeTask, []string{"/usr/bin/jq", "-c", "."}, false},
		{[]string{"exec", "--", "my-agent", "--flag"}, modeExec, []string{"my-agent", "--flag"}, false},
		{[]string{"--", "my-agent"}, modeExec, []string{"my-agent"}, false},
		{[]string{"task", "--", "--"}, modeTask, []string{"--"}, false},
		{[]string{"--"}, "", nil, true},
		{[]string{"task"}, "", nil, true},
		{[]string{"task", "--"}, "", nil, true},
		{[]string{"task", "jq"}, "", nil, true},
		{[]string{"exec"}, "", nil, true},
		{[]string{"run", "--", "x"}, "", nil, true},
		{[]string{"-v"}, "", nil, true},
		{[]string{"--version"}, modeVersion, nil, false},
		{[]string{"--version", "x"}, "", nil, true},
		{[]string{"--man"}, modeMan, nil, false},
		{[]string{"--man", "x"}, "", nil, true},
	} {
		inv, err := parseArgs(tc.args)
		switch {
		case tc.wantErr:
			if err == nil || !strings.Contains(err.Error(), "usage: flock-agent") {
				t.Errorf("%q: %+v, %v; want a usage error", tc.args, inv, err)
			}
		case err != nil || inv.mode != tc.mode || !slices.Equal(inv.argv, tc.argv):
			t.Errorf("%q: %+v, %v; want %s %q", tc.args, inv, err, tc.mode, tc.argv)
		}
	}
}
