package main

// Tier: unit (it runs in make test-system, with the rest of test/).

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
)

// TestReportSaysWhyTheyFailed: the report ends with each failed test and
// why, bounded, the first failures first. Its golden files show it.
func TestReportSaysWhyTheyFailed(t *testing.T) {
	tier := func(name, file string, err error) tierResult {
		return tierResult{name: name, elapsed: time.Minute, err: err, fails: readFails(capture(t, file)).failures()}
	}
	failed := errors.New("exit status 2")
	budget := map[string]time.Duration{"unit": 4 * time.Minute, "system": 25 * time.Minute, "vm": 25 * time.Minute, "preflight": time.Minute, allTiers: time.Hour}
	few := report{
		stages: [][]tierResult{{tier("system", "timeout-v.txt", failed), tier("vm", "timeout.txt", failed)}},
		budget: budget, total: 2 * time.Minute, slowest: 15, logs: "bin/test-logs",
	}
	golden.Check(t, "testdata/why-few.golden", few.String())

	many := report{
		stages: [][]tierResult{
			{tier("unit", "quiet.txt", failed)},
			{{name: "preflight", elapsed: time.Minute, err: failed, tail: []string{"=== RUN   TestPreflight", "go: downloading golang.org/x/sys v0.30.0", "make: *** [Makefile:240: preflight] Error 1"}}},
			{tier("system", "v.txt", failed)},
		},
		budget: budget, total: 3 * time.Minute, slowest: 15, logs: "bin/test-logs",
	}
	text := many.String()
	golden.Check(t, "testdata/why-many.golden", text)
	why := text[strings.Index(text, "\nWhy they failed"):]
	if n := strings.Count(why, "\n") - 1; n > maxWhyLines {
		t.Errorf("the section is %d lines, over %d:\n%s", n, maxWhyLines, why)
	}
	if !strings.HasSuffix(text, "each tier's log, bin/test-logs/<tier>.log, has all.\n") {
		t.Errorf("the report does not end saying what was left out:\n%s", why)
	}
}
