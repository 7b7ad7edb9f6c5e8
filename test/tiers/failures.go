package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// failure is why one test failed, as go test's output told it.
type failure struct {
	test    string     // TestX or TestX/sub; empty: the package, no test to blame
	pkg     string     // the test's package, from its "ok"/"FAIL" line
	entries [][]string // the log entries that say why, oldest first
}

// fails reads go test's output, -v or not, a line at a time, and keeps
// each failed test's log entries: with -v a test's log comes as it runs,
// tests interleaved (the === markers say whose lines follow); without,
// a failed test's whole log comes after its --- FAIL line, indented one
// level deeper than it. A package's state ends at its ok/FAIL line.
type fails struct {
	seq      int
	tests    map[string]*testLog
	cur      string   // the test the last === marker named
	block    []string // the tests of the --- lines since the last marker, by indent level
	lastFail string   // the last --- FAIL since the last marker: a test's own panic follows it
	open     *entry   // the entry continuation lines still extend
	panic    *panicked
	build    map[string][]string // each package's compile errors, under "# pkg"
	inBuild  string              // the package whose compile errors are coming
	since    []string            // the last lines since the last package's end
	done     []failure
	tail     []string // the last lines, for a tier that failed with no test to blame
}

type testLog struct {
	name    string
	entries []*entry // the last two, and the last before them that reads like a failure
	failed  int      // the seq of its failing: its --- FAIL line, a panic, a timeout
	ran     bool     // a === RUN marker came (go test -v)
	paused  bool
	ended   bool
	seen    int // the seq of its last own line: a marker or an entry
}

type entry struct {
	seq    int
	indent int // of its file:line, in spaces
	lines  []string
	more   int // lines left out, over entryMaxLines
}

// add appends a line to the entry, cut to the bounds the report shows.
func (e *entry) add(l string) {
	if len(e.lines) == entryMaxLines {
		e.more++
		return
	}
	if len(l) > lineMaxChars {
		n := lineMaxChars
		for n > 0 && !utf8.RuneStart(l[n]) {
			n--
		}
		l = l[:n] + "…"
	}
	e.lines = append(e.lines, l)
}

// panicked is a panic's report: its message and where it came from.
type panicked struct {
	msg     string
	timeout bool
	running []string // a timeout's "running tests:"
	frame   string   // the first frame in a _test.go file, as "func (file:line)"
	fn      string   // the function line before a frame
	state   int      // 0 its goroutine's header not yet, 1 in it, 2 past it
}

var (
	marker     = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME)\s*(.*)$`)
	resultLine = regexp.MustCompile(`^((?:    )*)--- (FAIL|PASS|SKIP): (.+?) \([0-9.]+s\)$`)
	logEntry   = regexp.MustCompile(`^((?:    )+)([\w./-]+\.go:\d+:(?: .*)?)$`)
	pkgResult  = regexp.MustCompile(`^(?:ok  |FAIL)\t(\S+)`)
	frameFile  = regexp.MustCompile(`^\t(\S+_test\.go:\d+)`)
	// A compiler's or vet's error, or its continuation, under "# pkg".
	buildError = regexp.MustCompile(`^(\S+\.go:\d+(:\d+)?: |\t|too many errors)`)
	// Words of a failure's message, to find the entry that failed among the
	// logs after it (an Errorf, then the test's tear-down).
	failWords = regexp.MustCompile(`(?i)\b(want|got|expected|unexpected|errors?|fail(ed|s|ure)?|fatal|panic|timeout|timed out|deadline|mismatch|differs|cannot|can't|could not|refused|denied|missing|never|no such)\b|!=|exit status`)
)

const (
	tailLines     = 5 // of a tier with no test to blame
	sinceLines    = 8
	entryMaxLines = 6
	lineMaxChars  = 400
)

func (f *fails) line(l string) {
	f.seq++
	f.tail = keepLast(f.tail, l, tailLines)
	if f.tests == nil {
		f.tests = map[string]*testLog{}
	}
	if f.panic != nil && !pkgResult.MatchString(l) {
		f.panicLine(l)
		return
	}
	if f.open != nil {
		if indent(l) >= f.open.indent+4 && !resultLine.MatchString(l) {
			f.open.add(l[f.open.indent+4:])
			return
		}
		f.open = nil
	}
	if f.inBuild != "" {
		if buildError.MatchString(l) {
			if len(f.build[f.inBuild]) < entryMaxLines {
				f.build[f.inBuild] = append(f.build[f.inBuild], l)
			}
			return
		}
		f.inBuild = ""
	}
	f.since = keepLast(f.since, l, sinceLines)
	if m := marker.FindStringSubmatch(l); m != nil {
		f.mark(m[1], strings.TrimSpace(m[2]))
	} else if m := resultLine.FindStringSubmatch(l); m != nil {
		f.ended(len(m[1])/4, m[2], m[3])
	} else if m := logEntry.FindStringSubmatch(l); m != nil {
		f.entry(len(m[1]), m[2])
	} else if strings.HasPrefix(l, "panic: ") {
		f.panic = &panicked{msg: l, timeout: strings.HasPrefix(l, "panic: test timed out after")}
	} else if pkg, ok := strings.CutPrefix(l, "# "); ok && pkg != "" {
		if f.build == nil {
			f.build = map[string][]string{}
		}
		f.inBuild = strings.Fields(pkg)[0]
	} else if m := pkgResult.FindStringSubmatch(l); m != nil {
		f.pkgEnd(m[1], strings.HasPrefix(l, "FAIL"))
	}
}

func keepLast(lines []string, l string, n int) []string {
	if len(lines) == n {
		lines = append(lines[:0], lines[1:]...)
	}
	return append(lines, l)
}

func (f *fails) test(name string) *testLog {
	t := f.tests[name]
	if t == nil {
		t = &testLog{name: name}
		f.tests[name] = t
	}
	return t
}

func (f *fails) mark(kind, name string) {
	f.cur, f.block, f.lastFail = name, nil, ""
	if name == "" {
		return
	}
	t := f.test(name)
	t.seen = f.seq
	switch kind {
	case "RUN":
		t.ran = true
	case "PAUSE":
		t.paused = true
	case "CONT":
		t.paused = false
	}
}

func (f *fails) ended(level int, verdict, name string) {
	f.block = append(f.block[:min(level, len(f.block))], name)
	t := f.test(name)
	t.ended = true
	if !t.ran {
		t.seen = f.seq // without -v: its log comes after this line
	}
	if verdict != "FAIL" {
		t.entries = nil // a passed test's log is not needed
		return
	}
	f.lastFail = name
	if t.failed == 0 {
		t.failed = f.seq
	}
}

// entry starts a log entry: without -v it is the test's of its indent's
// level in the --- block, with -v the test the last marker named.
func (f *fails) entry(ind int, text string) {
	name := f.cur
	if lvl := ind/4 - 1; lvl < len(f.block) {
		name = f.block[lvl]
	}
	if name == "" {
		return
	}
	f.open = &entry{seq: f.seq, indent: ind}
	f.open.add(text)
	f.test(name).log(f.open)
}

// log appends an entry, keeping of the earlier ones only those pick may
// choose: the last, and the last before it that reads like a failure.
func (t *testLog) log(e *entry) {
	if n := len(t.entries); n > 1 {
		var kept []*entry
		if i := lastFailing(t.entries[:n-1]); i >= 0 {
			kept = append(kept, t.entries[i])
		}
		t.entries = append(kept, t.entries[n-1])
	}
	t.entries = append(t.entries, e)
	t.seen = e.seq
}

// panicLine reads the lines after "panic:": a timeout's running tests,
// or the first frame of the panicking goroutine in a test file.
func (f *fails) panicLine(l string) {
	p := f.panic
	switch {
	case p.timeout && strings.HasPrefix(l, "\t\t"):
		if name, _, ok := strings.Cut(strings.TrimSpace(l), " ("); ok {
			p.running = append(p.running, name)
		}
	case p.timeout, p.state == 2:
	case strings.HasPrefix(l, "goroutine "):
		p.state = 1
	case p.state == 1 && l == "":
		p.state = 2
	case p.state == 1 && !strings.HasPrefix(l, "\t"):
		p.fn = l
	case p.state == 1 && p.frame == "":
		if m := frameFile.FindStringSubmatch(l); m != nil {
			fn := p.fn[strings.LastIndex(p.fn, "/")+1:]
			if i := strings.LastIndex(fn, "("); i > 0 {
				fn = fn[:i]
			}
			p.frame = "at " + fn + " (" + path.Base(m[1]) + ")"
			p.state = 2
		}
	}
}

// pkgEnd turns the package's failed tests into failures: the leaves, and
// a parent only for what it logged after its failed subtests that reads
// like a failure.
func (f *fails) pkgEnd(pkg string, failed bool) {
	f.settlePanic()
	if failed && !f.anyFailed() {
		f.blameRunning("no --- FAIL line: the test binary exited while it ran")
	}
	var failing []*testLog
	for _, t := range f.tests {
		if t.failed > 0 {
			failing = append(failing, t)
		}
	}
	slices.SortFunc(failing, func(a, b *testLog) int { return a.seen - b.seen }) // as they failed
	for _, t := range failing {
		children := 0 // the last line of its failed subtests
		for _, c := range failing {
			if strings.HasPrefix(c.name, t.name+"/") {
				children = max(children, c.seen)
			}
		}
		own := t.entries
		if children > 0 {
			// Its tear-down's logs after its subtests failed are not why.
			own = slices.DeleteFunc(slices.Clone(own), func(e *entry) bool { return e.seq < children })
			if lastFailing(own) < 0 {
				continue
			}
		}
		f.done = append(f.done, failure{test: t.name, pkg: pkg, entries: pick(own)})
	}
	if failed && len(failing) == 0 {
		why := f.build[pkg]
		if len(why) == 0 {
			why = lastNonEmpty(f.since[:len(f.since)-1], entryMaxLines)
		}
		var es [][]string
		if len(why) > 0 {
			es = [][]string{why}
		}
		f.done = append(f.done, failure{pkg: pkg, entries: es})
	}
	f.tests, f.cur, f.block, f.lastFail, f.open, f.since = nil, "", nil, "", nil, nil
}

func (f *fails) anyFailed() bool {
	for _, t := range f.tests {
		if t.failed > 0 {
			return true
		}
	}
	return false
}

// settlePanic gives a panic to the tests it failed: a timeout's running
// tests; a test's own panic (recovered and re-raised by the testing
// package) to the test whose --- FAIL came just before it; another
// goroutine's to the test running last, or else to the package.
func (f *fails) settlePanic() {
	p := f.panic
	if p == nil {
		return
	}
	f.panic = nil
	lines := []string{p.msg}
	if p.frame != "" {
		lines = append(lines, p.frame)
	}
	if p.timeout {
		for _, name := range leaves(p.running) {
			f.fail(f.test(name), lines)
		}
		return
	}
	if strings.Contains(p.msg, "[recovered") && f.lastFail != "" {
		f.fail(f.test(f.lastFail), lines)
		return
	}
	if t := f.tests[f.cur]; t != nil && !t.ended {
		f.fail(t, lines)
		return
	}
	f.fail(f.test(""), lines)
}

// blameRunning fails the tests still running, the leaves of them, with why.
func (f *fails) blameRunning(why string) {
	var running []string
	for _, t := range f.tests {
		if t.ran && !t.ended && !t.paused {
			running = append(running, t.name)
		}
	}
	slices.Sort(running)
	for _, name := range leaves(running) {
		f.fail(f.tests[name], []string{why})
	}
}

func (f *fails) fail(t *testLog, lines []string) {
	f.seq++
	if t.failed == 0 {
		t.failed = f.seq
	}
	t.log(&entry{seq: f.seq, lines: lines})
}

// failures is the failures once the output ended; a package cut short (the
// tier killed) is read as far as it came.
func (f *fails) failures() []failure {
	if len(f.tests) > 0 || f.panic != nil {
		f.pkgEnd("", false)
	}
	return f.done
}

// leaves are the names none of the others is a subtest of.
func leaves(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(o, n+"/") }) {
			out = append(out, n)
		}
	}
	return out
}

// pick chooses a test's entries that say why it failed: its last, and
// before it the last that reads like a failure (an Errorf followed by the
// test's tear-down logs), or else the one before the last.
func pick(es []*entry) [][]string {
	if len(es) == 0 {
		return nil
	}
	last := len(es) - 1
	chosen := []int{last}
	if last > 0 {
		prev := lastFailing(es[:last])
		if prev < 0 {
			prev = last - 1
		}
		chosen = []int{prev, last}
	}
	var out [][]string
	for _, i := range chosen {
		lines := es[i].lines
		if es[i].more > 0 {
			lines = append(lines[:len(lines)-1:len(lines)-1], fmt.Sprintf("[%d more lines in the log]", es[i].more+1))
		}
		out = append(out, lines)
	}
	return out
}

// lastFailing is the index of the last entry that reads like a failure, or -1.
func lastFailing(es []*entry) int {
	for i := len(es) - 1; i >= 0; i-- {
		if failWords.MatchString(strings.Join(es[i].lines, "\n")) {
			return i
		}
	}
	return -1
}

func lastNonEmpty(lines []string, n int) []string {
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if strings.TrimSpace(lines[i]) != "" && lines[i] != "FAIL" {
			out = append([]string{lines[i]}, out...)
		}
	}
	return out
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
