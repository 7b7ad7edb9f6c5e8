package main

// Tier: unit (it runs in make test-system, with the rest of test/).

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
)

func TestTimesReadsTopLevelTestsAndQuietPackages(t *testing.T) {
	out := `=== RUN   TestA
=== RUN   TestA/sub
    --- PASS: TestA/sub (1.50s)
--- PASS: TestA (2.25s)
=== RUN   TestB
    b_test.go:12: skipped: no root
--- SKIP: TestB (0.00s)
--- FAIL: TestC (61.00s)
FAIL
FAIL	github.com/flockrun/flock/test	63.300s
ok  	github.com/flockrun/flock/bus	12.345s
ok  	github.com/flockrun/flock/spec	(cached)
FAIL	github.com/flockrun/flock/proxy	4.000s
ok  	github.com/flockrun/flock/gateway	0.500s [no tests to run]
`
	var ts times
	for _, l := range strings.Split(out, "\n") {
		ts.line(l)
	}
	want := []testTime{
		{name: "TestA", elapsed: 2250 * time.Millisecond, result: "PASS"},
		{name: "TestB", result: "SKIP"},
		{name: "TestC", elapsed: 61 * time.Second, result: "FAIL"},
		{name: "github.com/flockrun/flock/bus", pkg: true, elapsed: 12345 * time.Millisecond, result: "PASS"},
		{name: "github.com/flockrun/flock/proxy", pkg: true, elapsed: 4 * time.Second, result: "FAIL"},
		{name: "github.com/flockrun/flock/gateway", pkg: true, elapsed: 500 * time.Millisecond, result: "PASS"},
	}
	if got := ts.tests(); !equal(got, want) {
		t.Errorf("times:\n got %+v\nwant %+v", got, want)
	}
}

func equal(a, b []testTime) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseStages(t *testing.T) {
	st, err := parseStages([]string{"test-unit", "preflight", "test-system+test-vm"})
	if err != nil || len(st) != 3 || strings.Join(st[2], ",") != "test-system,test-vm" {
		t.Errorf("parseStages = %q, %v", st, err)
	}
	for _, bad := range [][]string{nil, {"test-unit", "test-unit"}, {"a+"}, {"-o"}, {"x=1"}, {"test-vm+test-vm"}} {
		if _, err := parseStages(bad); err == nil {
			t.Errorf("parseStages(%q): no error", bad)
		}
	}
}

func TestParseBudgetsRefusesWhatItCannotRead(t *testing.T) {
	for name, page := range map[string]string{
		"no section":    "# Testing\n",
		"no table":      "## Budgets\n\nsome words\n",
		"no budget col": "## Budgets\n\n| tier | minutes |\n|---|---|\n| all | 60 |\n",
		"not a number":  "## Budgets\n\n| tier | budget (minutes) |\n|---|---|\n| unit | soon |\n| all | 60 |\n",
		"no all":        "## Budgets\n\n| tier | budget (minutes) |\n|---|---|\n| unit | 4 |\n",
		"twice":         "## Budgets\n\n| tier | budget (minutes) |\n|---|---|\n| unit | 4 |\n| unit | 5 |\n| all | 60 |\n",
	} {
		if b, err := parseBudgets(page); err == nil {
			t.Errorf("%s: parsed %v, want an error", name, b)
		}
	}
	b, err := parseBudgets("## Budgets\n\n| tier | budget (minutes) | measured |\n|---|---:|---|\n| `unit` | 4.5 | 3.3 |\n| all | 60 | 41 |\n\n## Next\n| x | 1 |\n")
	if err != nil || b["unit"] != 270*time.Second || b[allTiers] != time.Hour || len(b) != 2 {
		t.Errorf("parseBudgets = %v, %v", b, err)
	}
}

// TestBudgetsHoldTheMakefile: docs/testing.md has a budget for every tier
// make test runs, the stages' budgets (the longest of those that run at
// once) fit the whole run's, and each tier's go test -timeout in the
// Makefile is above its budget, so a slow tier is seen in the table
// before its timeout kills it.
func TestBudgetsHoldTheMakefile(t *testing.T) {
	page, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := parseBudgets(string(page))
	if err != nil {
		t.Fatalf("docs/testing.md: %v", err)
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TIERS\s*:?=\s*(.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no TIERS := line")
	}
	stages, err := parseStages(strings.Fields(string(m[1])))
	if err != nil {
		t.Fatalf("Makefile: TIERS: %v", err)
	}
	var sum time.Duration
	for _, st := range stages {
		var longest time.Duration
		for _, target := range st {
			b, ok := budgets[tierName(target)]
			if !ok {
				t.Errorf("docs/testing.md, Budgets: no row for tier %s (make %s)", tierName(target), target)
			}
			longest = max(longest, b)
			if timeout := recipeTimeout(string(mk), target); timeout > 0 && timeout <= b {
				t.Errorf("Makefile: %s's -timeout %v is not above its budget %v", target, timeout, b)
			}
		}
		sum += longest
	}
	if sum > budgets[allTiers] {
		t.Errorf("the stages' budgets add up to %v, over the whole run's %v", sum, budgets[allTiers])
	}
}

// recipeTimeout is the -timeout of target's go test in the Makefile, or 0.
func recipeTimeout(mk, target string) time.Duration {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:.*\n(?:\t.*\n)*?\t.*-timeout (\d+)m`).FindStringSubmatch(mk)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Minute
}

func TestReport(t *testing.T) {
	tt := func(name string, min float64, result string) testTime {
		return testTime{name: name, elapsed: time.Duration(min * float64(time.Minute)), result: result}
	}
	rep := report{
		stages: [][]tierResult{
			{{name: "unit", elapsed: 200 * time.Second, times: []testTime{{name: "github.com/flockrun/flock/bus", pkg: true, elapsed: 50 * time.Second, result: "PASS"}}}},
			{{name: "system", elapsed: 26 * time.Minute, times: []testTime{tt("TestCluster", 8.7, "PASS"), tt("TestShares", 1.7, "PASS")}},
				{name: "vm", elapsed: 20 * time.Minute, err: errors.New("exit status 2"), times: []testTime{tt("TestVMAnsible", 9, "FAIL"), tt("TestVMHarness", 1, "PASS")}}},
			{{name: "extra", elapsed: time.Minute}},
		},
		budget:  map[string]time.Duration{"unit": 4 * time.Minute, "system": 25 * time.Minute, "vm": 25 * time.Minute, allTiers: time.Hour},
		total:   30 * time.Minute,
		slowest: 4,
		logs:    "bin/test-logs",
	}
	if !rep.failed() {
		t.Error("a report with a failed tier is not failed")
	}
	golden.Check(t, "testdata/report.golden", rep.String())
}

// TestRunnerRunsStagesInOrderAndTiersAtOnce runs the runner against a
// stand-in make: the tiers of a stage at once (each waits to see the
// other started), every stage even after a failure, each tier's output
// in its log and on the shared output after its name.
func TestRunnerRunsStagesInOrderAndTiersAtOnce(t *testing.T) {
	dir := t.TempDir()
	fakeMake := filepath.Join(dir, "make")
	// The last argument is the target; -o names what it must not make.
	script := `#!/bin/sh
for a; do target=$a; done
echo "args: $*"
touch "` + dir + `/started-$target"
case $target in
a) for i in 1 2 3 4 5 6 7 8 9 10; do [ -e "` + dir + `/started-b" ] && break; sleep 0.2; done
   [ -e "` + dir + `/started-b" ] || { echo "b never started beside a"; exit 1; }
   echo "--- PASS: TestA (3.00s)"; echo "ok  	pkg/a	3.1s" ;;
b) echo "--- FAIL: TestB (1.00s)"; echo "    b_test.go:3: boom"; exit 2 ;;
c) echo "ok  	pkg/c	0.2s" ;;
esac
`
	if err := os.WriteFile(fakeMake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	stages := [][]string{{"a", "b"}, {"c"}}
	r := &runner{make: fakeMake, logs: dir, out: &out, others: allTargets(stages)}
	var res [][]tierResult
	for _, st := range stages {
		res = append(res, r.runStage(st))
	}
	if res[0][0].err != nil || res[0][1].err == nil || res[1][0].err != nil {
		t.Fatalf("results: a %v, b %v, c %v; want b alone failed\n%s", res[0][0].err, res[0][1].err, res[1][0].err, out.String())
	}
	if got := res[0][0].times; len(got) != 1 || got[0].name != "TestA" {
		t.Errorf("a's times: %+v", got)
	}
	if got := res[0][1].fails; len(got) != 1 || brief(got[0]) != "TestB (): b_test.go:3: boom" {
		t.Errorf("b's failures: %q", got)
	}
	for _, want := range []string{"a | args: --no-print-directory -o deps -o b -o c a\n", "b | --- FAIL: TestB (1.00s)\n", "args: --no-print-directory -o deps -o a -o b c\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no line %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "c | ") {
		t.Errorf("a stage of one tier is prefixed:\n%s", out.String())
	}
	if log, err := os.ReadFile(filepath.Join(dir, "b.log")); err != nil || !strings.Contains(string(log), "--- FAIL: TestB") {
		t.Errorf("b.log: %q, %v", log, err)
	}
}
