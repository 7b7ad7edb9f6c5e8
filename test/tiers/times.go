package main

import (
	"regexp"
	"strconv"
	"time"
)

// testTime is how long one top-level test took, or one package whose
// tests were not listed (go test without -v prints only the package).
type testTime struct {
	name    string // TestX, or a package's import path
	pkg     bool   // name is a package
	elapsed time.Duration
	result  string // PASS, FAIL or SKIP (ok is PASS for a package)
}

// times reads go test's output a line at a time.
type times struct {
	done    []testTime
	pending int // top-level tests since the last package line
}

var (
	// A top-level test's end: no indent (a subtest's is indented).
	testEnd = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)$`)
	// A package's end: "ok  	path	12.3s" or "FAIL	path	12.3s".
	pkgEnd = regexp.MustCompile(`^(ok|FAIL)\s+(\S+)\s+([0-9.]+)s\b`)
)

func (ts *times) line(l string) {
	if m := testEnd.FindStringSubmatch(l); m != nil {
		ts.done = append(ts.done, testTime{name: m[2], elapsed: seconds(m[3]), result: m[1]})
		ts.pending++
		return
	}
	if m := pkgEnd.FindStringSubmatch(l); m != nil {
		if ts.pending == 0 {
			result := "PASS"
			if m[1] == "FAIL" {
				result = "FAIL"
			}
			ts.done = append(ts.done, testTime{name: m[2], pkg: true, elapsed: seconds(m[3]), result: result})
		}
		ts.pending = 0
	}
}

func (ts *times) tests() []testTime { return ts.done }

func seconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64) // the pattern allows only digits and dots
	return time.Duration(f * float64(time.Second))
}
