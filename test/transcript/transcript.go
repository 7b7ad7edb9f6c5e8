// Package transcript records what an operator sees on a real flock, in
// the system test that made the situation, for a page of docs/ to show.
package transcript

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/test/harness"
)

// A Transcript is what an operator sees on a real flock, recorded by the
// system test that made the situation, for a page of docs/ to show: each
// command as it was run (as root, "# " before it) and what it printed.
// It lives in test/testdata/transcripts/NAME.txt: -update rewrites it,
// otherwise the run is compared with it, so a page never shows output no
// test saw (docs/'s unit test holds each page's block to its file).
//
// What changes from run to run (times, ages, process ids, ports, keys) is
// replaced by a placeholder, <time>, <age>, <pid> and the like, before it
// is written or compared; the comparison also ignores how many spaces
// align a column, since a placeholder may stand for text of any width.
type Transcript struct {
	t     testing.TB
	name  string
	rules []Rule
	b     strings.Builder
}

// A Rule replaces what matches Re with With (regexp.ReplaceAllString).
type Rule struct {
	Re   *regexp.Regexp
	With string
}

// R is a Rule from an expression.
func R(expr, with string) Rule { return Rule{regexp.MustCompile(expr), with} }

// volatile are the parts of flock's output that differ between two runs of
// the same test: every transcript replaces them.
var volatile = []Rule{
	R(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`, "<time>"),
	R(`\b\d{8}T\d{6}(\.\d+)?Z\b`, "<time>"),                                                     // in a directory's name
	R(`\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) <time>`, "<time>"),                                       // systemctl's
	R(`\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d\b`, "<time>"), // the journal's short form
	R(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s|m|h) ago\b`, "<age> ago"),
	R(`\(in (\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s)\)`, "(in <duration>)"),
	R(`\b(pid|PID) \d+`, "$1 <pid>"),
	R(`\bpid=\d+,fd=\d+`, "pid=<pid>,fd=<fd>"), // ss's
	R(`\[\d+\]:`, "[<pid>]:"),
	R(`(127\.0\.0\.1|\[::1\]):\d+ - cid:\d+`, "$1:<port> - cid:<n>"),
	R(`\bU[A-Z2-7]{55}\b`, "<nkey>"),
	R(`\b[0-9a-f]{32}\b`, "<id>"),
	R(`\btask [0-9A-Za-z]{22}\b`, "task <id>"), // an id flockctl send made (a NUID)
}

// New starts transcript name; it is written or compared when
// the test ends, unless the test failed. extra rules replace what else of
// this transcript's output changes between runs.
func New(t testing.TB, name string, extra ...Rule) *Transcript {
	t.Helper()
	tr := &Transcript{t: t, name: name, rules: append(append([]Rule(nil), volatile...), extra...)}
	t.Cleanup(tr.finish)
	return tr
}

// Dir is where transcripts live, in the repository.
func Dir(t testing.TB) string { return harness.InRepo(t, "test", "testdata", "transcripts") }

// Runner runs argv as root: a booted machine or a VM.
type Runner interface {
	Run(ctx context.Context, argv ...string) (stdout, stderr string, err error)
}

// Run runs cmdline (a shell command line, as an operator would type it)
// as root in m, records it and its output (stdout and stderr as they
// came), and returns that output for the test to check, and the command's
// error: a command that exits non-zero (flockctl store check on a damaged
// store) is recorded like any other.
func (tr *Transcript) Run(m Runner, cmdline string) (string, error) {
	tr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, _, err := m.Run(ctx, "bash", "-c", "{ "+cmdline+"\n} 2>&1")
	var re *harness.RunError
	if err != nil && !(errors.As(err, &re) && re.ExitCode > 0) {
		tr.t.Fatalf("transcript %s: %s: %v", tr.name, cmdline, err)
	}
	tr.record(cmdline, out)
	return out, err
}

// Want runs cmdline as Run does and fails the test unless its output
// holds each of wants.
func (tr *Transcript) Want(m Runner, cmdline string, wants ...string) string {
	tr.t.Helper()
	out, _ := tr.Run(m, cmdline)
	for _, w := range wants {
		if !strings.Contains(out, w) {
			tr.t.Errorf("transcript %s: %s printed no %q:\n%s", tr.name, cmdline, w, out)
		}
	}
	return out
}

// Until runs cmdline until ok accepts its output, at most for timeout
// (the test fails then), and records the run ok accepted: for a state
// that comes and goes, such as an agent's last exit between its restarts.
func (tr *Transcript) Until(m Runner, cmdline string, timeout time.Duration, ok func(out string) error) string {
	tr.t.Helper()
	var out string
	harness.Eventually(tr.t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		o, _, _ := m.Run(ctx, "bash", "-c", "{ "+cmdline+"\n} 2>&1")
		out = o
		return ok(o)
	})
	tr.record(cmdline, out)
	return out
}

func (tr *Transcript) record(cmdline, out string) {
	tr.t.Logf("transcript %s:\n# %s\n%s", tr.name, cmdline, out)
	fmt.Fprintf(&tr.b, "# %s\n%s", cmdline, tr.normalize(out))
	if out != "" && !strings.HasSuffix(out, "\n") {
		tr.b.WriteString("\n")
	}
}

// normalize replaces the volatile parts of out.
func (tr *Transcript) normalize(out string) string {
	for _, r := range tr.rules {
		out = r.Re.ReplaceAllString(out, r.With)
	}
	return out
}

func (tr *Transcript) finish() {
	t := tr.t
	if t.Failed() || t.Skipped() {
		return
	}
	path := filepath.Join(Dir(t), tr.name+".txt")
	got := tr.b.String()
	if golden.Update() {
		golden.Write(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("transcript %s: %v (run the test with -update to record it)", tr.name, err)
		return
	}
	if Same(string(want), got) {
		return
	}
	t.Errorf("transcript %s differs from what this run saw (docs/ shows it: if the change is meant, run the test with -update, review the diff, and update the page with it):\n%s",
		path, golden.LineDiff(string(want), got))
}

// Same says whether two transcripts say the same, however many
// spaces align their columns.
func Same(a, b string) bool { return squeeze(a) == squeeze(b) }

var spaces = regexp.MustCompile(`[ \t]+`)

func squeeze(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(spaces.ReplaceAllString(l, " "), " ")
	}
	return strings.Join(lines, "\n")
}
