// Command tiers runs make test's tiers and says where the time went.
//
//	tiers [-make make] [-budgets docs/testing.md] [-logs bin/test-logs] STAGE...
//
// A stage is a make target (test-unit, preflight...) or several joined by
// "+", which run at once; the stages run one after the other, every one
// of them even when an earlier one failed, so one run shows every tier's
// result. Each target runs as `make -o deps -o OTHER... TARGET`: the
// other stages' targets and deps are not made again as prerequisites
// (test-system's preflight, for one). A tier's output goes to stdout as it
// comes, each line led by the tier's name when its stage runs several,
// and whole to LOGS/<tier>.log.
//
// At the end it prints each tier's time against its budget (the table of
// docs/testing.md's "Budgets" section), the stages' total, and the
// slowest tests, and it exits 1 if a tier failed. A tier over its budget
// is marked in the table, never failed for it: a test run is not a
// timed assertion (docs/testing.md, "Budgets").
//
// Last, as CI keeps only the end of a run's output, "Why they failed":
// each failed test (the leaves; a parent only for a failure of its own
// after its subtests'), its tier and package, and the log entries that
// say why, read from go test's output as it came, -v or not: its last
// entry and the last before it that reads like a failure, a panic and
// its first frame in a test file, or a timeout. A package that did not
// build shows its compiler errors, a tier that failed with no test to
// blame its last lines. At most 8 failures in about 30 lines; what is
// left out is named, and each tier's log has all of it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	makeProg := flag.String("make", "make", "the make program (make passes $(MAKE))")
	budgets := flag.String("budgets", "docs/testing.md", "the page whose Budgets table gives each tier's minutes")
	logs := flag.String("logs", "bin/test-logs", "directory of each tier's whole output")
	slowest := flag.Int("slowest", 15, "how many of the slowest tests the table lists")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tiers [flags] STAGE... (a stage: a make target, or targets joined by + that run at once)")
		flag.PrintDefaults()
	}
	flag.Parse()
	stages, err := parseStages(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "tiers:", err)
		flag.Usage()
		os.Exit(2)
	}
	page, err := os.ReadFile(*budgets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tiers:", err)
		os.Exit(2)
	}
	budget, err := parseBudgets(string(page))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tiers: %s: %v\n", *budgets, err)
		os.Exit(2)
	}
	if err := os.MkdirAll(*logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "tiers:", err)
		os.Exit(2)
	}
	r := &runner{make: *makeProg, logs: *logs, out: os.Stdout, others: allTargets(stages)}
	t0 := time.Now()
	var results [][]tierResult
	for _, st := range stages {
		results = append(results, r.runStage(st))
	}
	rep := report{stages: results, budget: budget, total: time.Since(t0), slowest: *slowest, logs: *logs}
	fmt.Print("\n" + rep.String())
	if rep.failed() {
		os.Exit(1)
	}
}

// parseStages reads the stage arguments: each a target, or targets joined
// by +; no target twice.
func parseStages(args []string) ([][]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no stage given")
	}
	seen := map[string]bool{}
	var stages [][]string
	for _, a := range args {
		var st []string
		for _, target := range strings.Split(a, "+") {
			if target == "" || strings.ContainsAny(target, " \t=") || strings.HasPrefix(target, "-") {
				return nil, fmt.Errorf("stage %q: %q is not a make target", a, target)
			}
			if seen[target] {
				return nil, fmt.Errorf("stage %q: target %s is given twice", a, target)
			}
			seen[target] = true
			st = append(st, target)
		}
		stages = append(stages, st)
	}
	return stages, nil
}

func allTargets(stages [][]string) []string {
	var all []string
	for _, st := range stages {
		all = append(all, st...)
	}
	return all
}

// tierName is how the table and the logs name a target's tier: test-vm
// is vm, preflight preflight.
func tierName(target string) string { return strings.TrimPrefix(target, "test-") }
