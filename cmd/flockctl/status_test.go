package main

import (
	"strings"
	"testing"

	"github.com/flockrun/flock/units"
)

// Tier: unit. Below the status table: a diagnosed agent with its wall and
// fix, a restart loop no wall explains, and nothing for a healthy agent.
func TestPrintDiagnoses(t *testing.T) {
	var b strings.Builder
	printDiagnoses(&b, []agentStatus{
		{ID: 2, Restarts: 4, LastExit: "killed by SIGTRAP", Diagnosis: &units.Diagnosis{Wall: "MemoryDenyWriteExecute", Why: "it died", Fix: "set jit: true on agent 2"}},
		{ID: 3, Restarts: 7, LastExit: "exited 2"},
		{ID: 4, Restarts: 1, LastExit: "exited 0"},
		{ID: 5},
	})
	want := "agent 2 keeps dying (4 restarts, last killed by SIGTRAP). Likely wall: MemoryDenyWriteExecute: it died.\n  fix: set jit: true on agent 2\n" +
		"agent 3 keeps dying (7 restarts, last exited 2); no wall explains it: flockctl logs 3\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
