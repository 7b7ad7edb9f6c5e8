package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/test/harness"
)

// TestPreflight checks, before any tier runs, that the machine has what
// every tier needs, and names everything missing with its fix at once
// (make preflight; make test-system runs it first).
//
// Tier: preflight (none of its own: it fails in CI if any tier's needs
// are missing, and outside CI skips with the list).
func TestPreflight(t *testing.T) {
	var missing []string
	for _, tr := range harness.Tiers {
		if err := tr.Missing(); err != nil {
			missing = append(missing, fmt.Sprintf("tier %s:\n  %s", tr.Name, strings.ReplaceAll(err.Error(), "\n", "\n  ")))
			continue
		}
		t.Logf("tier %s: ready (%d needs)", tr.Name, len(tr.Needs))
	}
	tier.Require(t, "the machine lacks what these tiers need (make deps installs it all):\n"+strings.Join(missing, "\n"), len(missing) == 0)
}
