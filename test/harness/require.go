package harness

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// requireNspawn skips or fails t by the tier rule unless the host can
// boot a machine.
func requireNspawn(t testing.TB) {
	t.Helper()
	requireBoot(t, NspawnTier, "boots a systemd machine")
}

// requireBoot skips or fails t by the tier rule unless the host has tr;
// a test that boots (said as boots) is skipped with -short too.
func requireBoot(t testing.TB, tr Tier, boots string) {
	t.Helper()
	if testing.Short() {
		t.Skip(boots + ": not with -short")
	}
	tr.Require(t)
}

// Boot boots a machine with the project's binaries for the test, or skips
// or fails it by the tier rule. The machine is torn down when the test
// ends; if the test failed, its console tail and journal are logged first.
func Boot(t testing.TB) *Machine {
	t.Helper()
	return BootWith(t, Options{})
}

// BootWith is Boot with options; Log defaults to the test's log.
func BootWith(t testing.TB, o Options) *Machine {
	t.Helper()
	requireNspawn(t)
	if o.Log == nil {
		o.Log = testLog{t}
	}
	return bootFor(t, 30*time.Second, func() (*Machine, error) { return Start(context.Background(), o) })
}

// bootFor boots with start for t, or fails it, and closes what it booted
// when t ends (closeAtEnd, with wait).
func bootFor[B booted](t testing.TB, wait time.Duration, start func() (B, error)) B {
	t.Helper()
	b, err := start()
	if err != nil {
		t.Fatalf("boot: %v", err)
	}
	closeAtEnd(t, b, wait)
	return b
}

// booted is what Machine and VM share for closeAtEnd.
type booted interface {
	Name() string
	Run(ctx context.Context, argv ...string) (stdout, stderr string, err error)
	ConsoleTail(n int) string
	Close() error
}

// closeAtEnd closes b when the test ends; if the test failed, b's console
// tail and journal are logged first (reading the journal may take up to
// wait).
func closeAtEnd(t testing.TB, b booted, wait time.Duration) {
	what := b.Name()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: console tail:\n%s", what, b.ConsoleTail(50))
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			out, errOut, err := b.Run(ctx, "journalctl", "-n", "100", "--no-pager")
			cancel()
			t.Logf("%s: journalctl -n 100 (%v):\n%s%s", what, err, out, errOut)
		}
		if err := b.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
}

// TestLog is a writer whose lines go to t's log.
func TestLog(t testing.TB) io.Writer { return testLog{t} }

// testLog sends the harness's progress lines to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
