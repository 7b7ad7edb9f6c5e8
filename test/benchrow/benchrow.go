// Package benchrow is how every benchmark of make bench reports a row of
// its one table: a line "BENCHROW {json}" on the benchmark's output, which
// test/benchtable gathers from all packages and prints as the table. A row
// carries its raw figures, not a summary, so the median, the spread and the
// ratio are computed once, the same way for every row.
package benchrow

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Prefix starts every row's line in the go test output.
const Prefix = "BENCHROW "

// QuickEnv set to 1 (make bench QUICK=1) asks for the short form: small
// N, one repetition, no 300 or 1000 rows.
const QuickEnv = "FLOCK_BENCH_QUICK"

// Groups are the table's sections, in the order it prints them.
var Groups = []string{"provision", "status", "deprovision", "add one", "start", "bus", "tasks", "egress", "models", "idle"}

// Row is one line of the table: what was measured, at how many agents,
// flock's figures and its floor's, each one per repetition (or per agent,
// for per-agent figures), measured in the same run.
type Row struct {
	Group  string    `json:"group"`            // one of Groups
	What   string    `json:"what"`             // what is measured
	Floor  string    `json:"floor,omitempty"`  // what it is measured against; "" when there is no floor
	N      int       `json:"n,omitempty"`      // agents; 0 when it does not apply
	Unit   string    `json:"unit"`             // of Flock and Base: s, ms, µs, MiB, %core, msg/s...
	Higher bool      `json:"higher,omitempty"` // more is better (throughput)
	Flock  []float64 `json:"flock"`
	Base   []float64 `json:"base,omitempty"` // the floor's figures
	Goal   string    `json:"goal,omitempty"` // the goal for flock's figure, e.g. "≤ 1 s"
	Note   string    `json:"note,omitempty"` // a footnote: how the floor is made, what differs
}

// Print writes r where test/benchtable finds it. Speed is never asserted:
// a row is printed whatever its figures.
func Print(tb testing.TB, r Row) {
	tb.Helper()
	if len(r.Flock) == 0 {
		tb.Errorf("benchrow %q: no figures", r.What)
		return
	}
	line, err := json.Marshal(r)
	if err != nil {
		tb.Errorf("benchrow %q: %v", r.What, err)
		return
	}
	// Straight to stdout, not tb.Log: go test prints it whole, at once and
	// unindented, with or without -v.
	fmt.Printf("%s%s\n", Prefix, line)
}

// Parse reads a row from one line of output; ok is false for any other line.
func Parse(line string) (r Row, ok bool, err error) {
	rest, found := strings.CutPrefix(line, Prefix)
	if !found {
		return Row{}, false, nil
	}
	if err := json.Unmarshal([]byte(rest), &r); err != nil {
		return Row{}, true, fmt.Errorf("benchrow: %w: %q", err, line)
	}
	return r, true, nil
}

// Quick reports whether the short form was asked for.
func Quick() bool { return os.Getenv(QuickEnv) == "1" }

// Reps is how many repetitions a benchmark makes: full in the full form,
// one in the short. It is not b.N: make bench runs each benchmark once
// (-benchtime 1x) and the benchmark repeats its own measures, so every
// row of one run has the repetitions it says.
func Reps(full int) int {
	if Quick() {
		return 1
	}
	return full
}

// Ns is the agent counts a benchmark runs at: full, or in the short form
// those up to 100.
func Ns(full ...int) []int {
	if !Quick() {
		return full
	}
	var ns []int
	for _, n := range full {
		if n <= 100 {
			ns = append(ns, n)
		}
	}
	return ns
}
