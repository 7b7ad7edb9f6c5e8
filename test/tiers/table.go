package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the table printed at the end of a run, and last, as CI keeps
// only the end of a run's output, why each failed test failed.
type report struct {
	stages  [][]tierResult
	budget  map[string]time.Duration
	total   time.Duration
	slowest int
	logs    string
}

func (rep report) failed() bool {
	for _, st := range rep.stages {
		for _, t := range st {
			if t.err != nil {
				return true
			}
		}
	}
	return false
}

func (rep report) String() string {
	lines := strings.Split(rep.text(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ") // tabwriter pads an empty last cell
	}
	return strings.Join(lines, "\n")
}

func (rep report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Where the time went (each tier's whole output: %s/<tier>.log; the budgets: docs/testing.md, Budgets)\n\n", rep.logs)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "tier\tresult\tminutes\tbudget\t")
	var over []string
	check := func(name string, took time.Duration) string {
		bud, ok := rep.budget[name]
		switch {
		case !ok:
			over = append(over, name+" has no budget")
			return "no budget"
		case took > bud:
			over = append(over, fmt.Sprintf("%s took %s minutes, its budget is %s", name, minutes(took), minutes(bud)))
			return "OVER BUDGET"
		}
		return ""
	}
	for _, st := range rep.stages {
		for i, t := range st {
			result := "passed"
			if t.err != nil {
				result = "FAILED"
			}
			mark := check(t.name, t.elapsed)
			if len(st) > 1 {
				mark = strings.TrimSpace(mark + " " + together(i, len(st)))
			}
			fmt.Fprintf(w, "%s\t%s\t%7s\t%6s\t%s\n", t.name, result, minutes(t.elapsed), minutes(rep.budget[t.name]), mark)
		}
	}
	fmt.Fprintf(w, "%s\t\t%7s\t%6s\t%s\n", allTiers, minutes(rep.total), minutes(rep.budget[allTiers]), check(allTiers, rep.total))
	w.Flush()
	for _, o := range over {
		fmt.Fprintf(&b, "  %s\n", o)
	}

	type ran struct {
		testTime
		tier string
	}
	var all []ran
	for _, st := range rep.stages {
		for _, t := range st {
			for _, tt := range t.times {
				all = append(all, ran{tt, t.name})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b ran) int { return cmp.Compare(b.elapsed, a.elapsed) })
	all = all[:min(len(all), rep.slowest)]
	if len(all) > 0 {
		fmt.Fprintf(&b, "\nThe %d slowest tests\n\n", len(all))
		w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "minutes\ttier\ttest")
		for _, t := range all {
			name := t.name
			if t.pkg {
				name += " (package)"
			}
			if t.result != "PASS" {
				name += " " + t.result
			}
			fmt.Fprintf(w, "%7s\t%s\t%s\n", minutes(t.elapsed), t.tier, name)
		}
		w.Flush()
	}
	b.WriteString(rep.whyFailed())
	return b.String()
}

// together marks the tiers of a stage that ran at once.
func together(i, n int) string {
	switch i {
	case 0:
		return "┐ at once"
	case n - 1:
		return "┘"
	}
	return "│"
}

// minutes is d in minutes to a tenth.
func minutes(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", d.Minutes())
}
