package main

// Tier: unit (it runs in make test-system, with the rest of test/).

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// readFails runs go test's output through fails, a line at a time.
func readFails(out string) *fails {
	var f fails
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f.line(l)
	}
	return &f
}

func capture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/gotest/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// brief is a failure on one line: "test (pkg): entry | entry", an entry's
// lines joined by "⏎".
func brief(f failure) string {
	var es []string
	for _, e := range f.entries {
		es = append(es, strings.Join(e, "⏎"))
	}
	return f.test + " (" + f.pkg + "): " + strings.Join(es, " | ")
}

// TestFailsSaysWhyEachTestFailed reads go test's real output (testdata/
// gotest/README has the tests and the commands) and says, for each failed
// leaf test, the entries that say why.
func TestFailsSaysWhyEachTestFailed(t *testing.T) {
	const (
		a = "example.com/samp/a"
		// Errorf, then more logs: the failure and the last.
		errorf = "TestErrorfThenLogs (" + a + "): a_test.go:11: share count = 2, want 3 | a_test.go:13: torn down"
		// Fatalf in a parallel subtest, its log interleaved with its sibling's.
		parallel = "TestParallelFatal/two (" + a + "): a_test.go:21: two: poll 2 | a_test.go:25: two: agent never came up: timeout after 3 polls"
		// A multi-line message: its continuation lines, blank ones too.
		transcript = "TestTranscript (" + a + "): a_test.go:32: running flockctl up | a_test.go:33: flockctl up: exit status 1⏎$ flockctl up⏎error: unit flock-a.service:⏎  failed to start⏎⏎hint: see journalctl"
		// A parent with a failure of its own after its subtest's, both; a
		// parent that failed only for its subtest, the leaf alone.
		sub        = "TestParentOwn/sub (" + a + "): a_test.go:40: sub broke"
		parent     = "TestParentOwn (" + a + "): a_test.go:42: parent: cannot go on without sub"
		deeper     = "TestParentOnly/leaf/deeper (" + a + "): a_test.go:49: x | a_test.go:49: deep failure"
		afterPrint = "TestPrint (" + a + "): a_test.go:55: after print"
		// A test's own panic (the testing package recovers and re-raises it):
		// the panic and its first frame in a test file.
		panicked    = "TestPanic (example.com/samp/p): p_test.go:10: about to index | panic: runtime error: index out of range [3] with length 0 [recovered, repanicked]⏎at p.TestPanic (p_test.go:12)"
		subPanicked = "TestSubPanic/bad (example.com/samp/q): q_test.go:8: reading the config | panic: assignment to entry in nil map [recovered, repanicked]⏎at q.TestSubPanic.func2 (q_test.go:10)"
		goPanic     = "panic: proxy: nil binding for host example.com⏎at g.boom (g_test.go:8)"
	)
	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"go test -v", "v.txt", []string{
			errorf, parallel, transcript, sub, parent, deeper, afterPrint, panicked, subPanicked,
			// Another goroutine's panic: -v says which test was running.
			"TestGoroutinePanic (example.com/samp/g): g_test.go:11: starting the proxy | " + goPanic,
			// os.Exit: the package fails with no --- FAIL.
			"TestExit (example.com/samp/e): e_test.go:3: leaving | no --- FAIL line: the test binary exited while it ran",
		}},
		{"go test, the messages after --- FAIL", "quiet.txt", []string{
			errorf, parallel, transcript, sub, parent, deeper, afterPrint,
			// A package that did not build: the compiler's errors.
			` (example.com/samp/b): b/b.go:3:23: cannot use "x" (untyped string constant) as int value in return statement`,
			" (example.com/samp/e): exit status 3",
			panicked, subPanicked,
			// Without -v no test is known to be running: the package's.
			" (example.com/samp/g): " + goPanic,
		}},
		{"a timeout, -v: the running leaf, its last log", "timeout-v.txt", []string{
			"TestSlow/waits (example.com/samp/t): t_test.go:10: waiting for the VM | panic: test timed out after 2s",
		}},
		{"a timeout", "timeout.txt", []string{
			"TestSlow/waits (example.com/samp/t): panic: test timed out after 2s",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readFails(capture(t, c.file)).failures()
			var lines []string
			for _, f := range got {
				lines = append(lines, brief(f))
			}
			if !slices.Equal(lines, c.want) {
				t.Errorf("failures:\n got %s\nwant %s", strings.Join(lines, "\n     "), strings.Join(c.want, "\n     "))
			}
		})
	}
}

// TestFailsBoundsEntries: an entry is cut to entryMaxLines lines of
// lineMaxChars, a test keeps no more entries than pick may choose, and a
// passed test keeps none.
func TestFailsBoundsEntries(t *testing.T) {
	long := strings.Repeat("é", lineMaxChars) // two bytes each: the cut keeps whole runes
	var out strings.Builder
	out.WriteString("=== RUN   TestLong\n")
	out.WriteString("    x_test.go:1: missing a line\n")
	for i := range 1000 {
		out.WriteString("    x_test.go:2: poll " + strings.Repeat("x", i%7) + "\n")
	}
	out.WriteString("    x_test.go:3: " + long + "\n")
	for range 10 {
		out.WriteString("        more\n")
	}
	out.WriteString("--- FAIL: TestLong (1.00s)\n=== RUN   TestPassed\n    x_test.go:4: fine\n--- PASS: TestPassed (0.00s)\n")
	f := readFails(out.String())
	if n := len(f.tests["TestLong"].entries); n > 3 {
		t.Errorf("TestLong keeps %d entries, want at most 3", n)
	}
	if n := len(f.tests["TestPassed"].entries); n != 0 {
		t.Errorf("a passed test keeps %d entries", n)
	}
	got := f.failures()
	if len(got) != 1 || got[0].test != "TestLong" || len(got[0].entries) != 2 {
		t.Fatalf("failures: %q", got)
	}
	if e := got[0].entries[0]; strings.Join(e, "") != "x_test.go:1: missing a line" {
		t.Errorf("the entry that reads like a failure: %q", e)
	}
	last := got[0].entries[1]
	if len(last) != entryMaxLines || last[entryMaxLines-1] != "[6 more lines in the log]" {
		t.Errorf("the last entry is not cut to %d lines: %q", entryMaxLines, last)
	}
	if first := last[0]; !strings.HasSuffix(first, "…") || len(first) > lineMaxChars+len("…") || !strings.HasPrefix(first, "x_test.go:3: éé") || strings.ContainsRune(first, '\uFFFD') {
		t.Errorf("the long line is not cut at a rune to %d bytes: %d bytes, %q", lineMaxChars, len(first), first[:40])
	}
}

// A parent whose subtest failed and which then logged only its tear-down
// (a machine powered off) is not reported: the leaf says why. The lines
// are TestVMEnforcesLimits' in a CI run.
func TestFailsLeavesAParentsTearDown(t *testing.T) {
	out := `=== RUN   TestVMEnforcesLimits
    require.go:92: vm flock-vm-21316-5: booted in 16.816s (qemu pid 5126, ssh on 127.0.0.1:45591)
=== RUN   TestVMEnforcesLimits/fork_bomb_never_exceeds_TasksMax
    vm_limits_test.go:411: flock-agent@2.service reached 21 tasks, above TasksMax 20
    vm_limits_test.go:427: FIGURE tasks: max 21 tasks sampled (1135 samples; pids.peak 20) vs TasksMax 20
=== NAME  TestVMEnforcesLimits
    require.go:92: vm flock-vm-21316-5: powered off in 26ms (<nil>)
    require.go:92: VM flock-vm-21316-5: torn down in 36ms
--- FAIL: TestVMEnforcesLimits (129.10s)
    --- FAIL: TestVMEnforcesLimits/fork_bomb_never_exceeds_TasksMax (1.01s)
FAIL
FAIL	github.com/flockrun/flock/test	1349.708s
`
	f := readFails(out)
	var got []string
	for _, fl := range f.failures() {
		got = append(got, fl.test)
	}
	if want := []string{"TestVMEnforcesLimits/fork_bomb_never_exceeds_TasksMax"}; !slices.Equal(got, want) {
		t.Errorf("failures %q, want the leaf alone %q", got, want)
	}
}
