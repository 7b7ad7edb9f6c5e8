package agent

import (
	"slices"
	"strings"
	"testing"
)

// Tier: unit. What systemd 252 reads back verbatim after a reload ("$",
// ";") never stands on the command line; everything comes back as it went.
func TestUnitArgsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		encoded bool
	}{
		{"none", nil, false},
		{"plain", []string{"exec", "--", "/usr/bin/node", "agent.js", "%i", "a b", `"q"`, `back\slash`, "é", "a\tb"}, false},
		{"dollar", []string{"task", "--", "/bin/sh", "-c", "echo $HOME ${X} $$"}, true},
		{"semicolon", []string{"exec", "--", "/bin/sh", "-c", "true; false"}, true},
		{"looks encoded", []string{"--args=WyJ4Il0"}, true},
		{"flag among others", []string{"exec", "--", "--args=x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := UnitArgs(tc.args)
			if got := len(line) == 1 && strings.HasPrefix(line[0], argsFlag) && len(tc.args) > 0; got != tc.encoded {
				t.Errorf("UnitArgs(%q) = %q: encoded %v, want %v", tc.args, line, got, tc.encoded)
			}
			for _, a := range line {
				if strings.ContainsAny(a, "$;") {
					t.Errorf("UnitArgs(%q) puts %q on the command line", tc.args, a)
				}
			}
			back, err := ParseUnitArgs(line)
			if err != nil || !slices.Equal(back, tc.args) {
				t.Errorf("ParseUnitArgs(UnitArgs(%q)) = %q, %v", tc.args, back, err)
			}
		})
	}
	for _, bad := range []string{"--args=!!", "--args=bm90IGpzb24"} {
		if _, err := ParseUnitArgs([]string{bad}); err == nil || !strings.Contains(err.Error(), "provision rewrites it") {
			t.Errorf("ParseUnitArgs(%q): %v, want an error naming the fix", bad, err)
		}
	}
}
