package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/wire"
)

// RunCommand's outcomes, each within a bound: it must never hang.
// Tier: unit (no root).
func TestRunCommand(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		argv   []string
		stdin  string
		lim    RunLimits
		within time.Duration
		check  func(wire.Result) bool
	}{
		{"echoes stdin", []string{"cat"}, "hello\n", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return r.OK && r.ExitStatus == 0 && r.Output == "hello\n" && r.Error == ""
		}},
		{"exit 3", []string{"sh", "-c", "exit 3"}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.ExitStatus == 3 && r.Error == "exited with status 3"
		}},
		{"timeout", []string{"sleep", "10"}, "", RunLimits{Timeout: 200 * time.Millisecond}, 2 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.ExitStatus == -1 && r.Error == "timed out after 200ms"
		}},
		{"timeout keeps output so far", []string{"sh", "-c", "echo partial; sleep 10"}, "", RunLimits{Timeout: 300 * time.Millisecond}, 2 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.Output == "partial\n" && strings.HasPrefix(r.Error, "timed out")
		}},
		{"SIGTERM ignored: SIGKILL after the grace", []string{"sh", "-c", "trap '' TERM; sleep 10"}, "", RunLimits{Timeout: 100 * time.Millisecond}, killGrace + 2*time.Second, func(r wire.Result) bool {
			return !r.OK && r.ExitStatus == -1 && strings.HasPrefix(r.Error, "timed out")
		}},
		{"overflow", []string{"yes"}, "", RunLimits{MaxOutput: 1000}, 2 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.Truncated && len(r.Output)+len(r.Stderr) == 1000 &&
				r.Error == "output exceeded max_output (1000 bytes); the command was stopped"
		}},
		{"overflow counts stderr", []string{"sh", "-c", "yes >&2"}, "", RunLimits{MaxOutput: 1000}, 2 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.Truncated && r.Output == "" && len(r.Stderr) == 1000
		}},
		{"exactly max output is fine", []string{"head", "-c", "1000", "/dev/zero"}, "", RunLimits{MaxOutput: 1000}, 5 * time.Second, func(r wire.Result) bool {
			return r.OK && !r.Truncated && len(r.Output) == 1000
		}},
		{"grandchild holding stdout", []string{"sh", "-c", "sleep 30 & echo hi"}, "", RunLimits{}, time.Second, func(r wire.Result) bool {
			return r.OK && r.Output == "hi\n"
		}},
		{"runs in dir", []string{"pwd"}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return r.OK && r.Output == dir+"\n"
		}},
		{"missing program", []string{"flock-no-such-program"}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.ExitStatus == -1 && strings.Contains(r.Error, "flock-no-such-program")
		}},
		{"no command", nil, "", RunLimits{}, time.Second, func(r wire.Result) bool {
			return !r.OK && r.Error == "no command to run"
		}},
		{"stderr captured", []string{"sh", "-c", "echo out; echo err >&2"}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return r.OK && r.Output == "out\n" && r.Stderr == "err\n"
		}},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return !r.OK && r.ExitStatus == -1 && r.Error == "killed by signal: killed"
		}},
		{"stdin not read", []string{"true"}, strings.Repeat("x", 1<<20), RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			return r.OK
		}},
		{"invalid UTF-8 passes", []string{"printf", `\377ok`}, "", RunLimits{}, 5 * time.Second, func(r wire.Result) bool {
			b, err := json.Marshal(r)
			return r.OK && r.Output == "\xffok" && err == nil && strings.Contains(string(b), `"output":"\ufffdok"`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := RunCommand(context.Background(), tc.argv, dir, []byte(tc.stdin), tc.lim)
			if took := time.Since(start); took > tc.within {
				t.Errorf("took %s, want under %s", took, tc.within)
			}
			if !tc.check(r) || (len(tc.argv) > 0 && r.DurationMS <= 0) {
				t.Errorf("result %+v", r)
			}
		})
	}
}

// Cancelling the context stops a running command, and one not yet started
// does not start. Tier: unit (no root).
func TestRunCommandCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	r := RunCommand(ctx, []string{"sleep", "10"}, "", nil, RunLimits{})
	if time.Since(start) > 2*time.Second || r.OK || r.ExitStatus != -1 || !strings.HasPrefix(r.Error, "stopped before it finished") {
		t.Errorf("cancelled: %+v after %s", r, time.Since(start))
	}
	r = RunCommand(ctx, []string{"true"}, "", nil, RunLimits{})
	if r.OK || !strings.HasPrefix(r.Error, "not started") {
		t.Errorf("after cancel: %+v", r)
	}
}
