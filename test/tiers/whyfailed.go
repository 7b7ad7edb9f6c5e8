package main

import (
	"fmt"
	"strings"
)

// The "Why they failed" section ends the run's output, and CI keeps only
// the last 25 lines or so of it: it is bounded, the first failures first.
const (
	maxFailed   = 8
	maxWhyLines = 30 // its title and closing line too
	maxLineList = 300
)

// blamed is a failure and its tier.
type blamed struct {
	failure
	tier    string
	noTests bool // the tier failed with no test to blame: entries is its last lines
}

func (b blamed) header() string {
	switch {
	case b.noTests:
		return b.tier + ": failed with no failed test; its last lines:"
	case b.test == "" || b.pkg == "":
		return b.tier + ": " + b.name()
	}
	return fmt.Sprintf("%s: %s (%s)", b.tier, b.test, b.pkg)
}

func (b blamed) name() string {
	switch {
	case b.noTests:
		return "no failed test"
	case b.test == "":
		return "package " + b.pkg
	}
	return b.test
}

// lines is the failure's lines: its header, then each entry's lines under
// it, a continuation deeper than its file:line, as go test puts them.
func (b blamed) lines() []string {
	lines := []string{b.header()}
	for _, e := range b.entries {
		for i, l := range e {
			if b.noTests || i == 0 {
				lines = append(lines, "    "+l)
			} else {
				lines = append(lines, "        "+l)
			}
		}
	}
	return lines
}

// fit cuts a failure's lines to room: its older entries first, then the
// last one's end.
func (b blamed) fit(room int) (lines []string, cut bool) {
	for len(b.entries) > 1 && len(b.lines()) > room {
		b.entries, cut = b.entries[1:], true
	}
	lines = b.lines()
	if len(lines) > room {
		lines, cut = lines[:room], true
	}
	return lines, cut
}

// whyFailed is the section: each failed test, its tier and package, and
// the log entries that say why (fails, pick). Past maxFailed, each tier's
// first failures are shown before any tier's later ones; the lines are
// shared out evenly, a short failure's spare lines going to the others.
func (rep report) whyFailed() string {
	var byTier [][]blamed
	for _, st := range rep.stages {
		for _, t := range st {
			if t.err == nil {
				continue // a passed tier's "--- FAIL" lines were some test's output
			}
			var bs []blamed
			for _, f := range t.fails {
				bs = append(bs, blamed{failure: f, tier: t.name})
			}
			if len(t.fails) == 0 && len(t.tail) > 0 {
				bs = append(bs, blamed{failure: failure{entries: [][]string{t.tail}}, tier: t.name, noTests: true})
			}
			if len(bs) > 0 {
				byTier = append(byTier, bs)
			}
		}
	}
	if len(byTier) == 0 {
		return ""
	}
	var shown, left []blamed
	taken := make([]int, len(byTier)) // of each tier's, shown
	for n := 0; n < maxFailed; {
		more := false
		for i, bs := range byTier {
			if taken[i] < len(bs) && n < maxFailed {
				taken[i]++
				n++
				more = true
			}
		}
		if !more {
			break
		}
	}
	for i, bs := range byTier {
		shown, left = append(shown, bs[:taken[i]]...), append(left, bs[taken[i]:]...)
	}

	room := make([]int, len(shown)) // lines of each, a header and one line first
	full := make([]int, len(shown))
	spare := maxWhyLines - 3 // the title, a blank line, and the closing line
	for i, f := range shown {
		full[i] = len(f.lines())
		room[i] = min(full[i], 2)
		spare -= room[i]
	}
	for grown := true; spare > 0 && grown; {
		grown = false
		for i := range shown {
			if spare > 0 && room[i] < full[i] {
				room[i]++
				spare--
				grown = true
			}
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nWhy they failed (each failed test's last log entries; all of a tier's output: %s/<tier>.log)\n\n", rep.logs)
	anyCut := false
	for i, f := range shown {
		lines, cut := f.fit(room[i])
		anyCut = anyCut || cut
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	if len(left) > 0 {
		list := ""
		for i, f := range left {
			name := fmt.Sprintf("%s (%s)", f.name(), f.tier)
			if len(list)+len(name) > maxLineList {
				list += ", …"
				break
			}
			if i > 0 {
				list += ", "
			}
			list += name
		}
		fmt.Fprintf(&b, "%d more failed, not shown: %s; each tier's log, %s/<tier>.log, has all.\n", len(left), list, rep.logs)
	} else if anyCut {
		fmt.Fprintf(&b, "Cut to fit; each tier's log, %s/<tier>.log, has all.\n", rep.logs)
	}
	return b.String()
}
