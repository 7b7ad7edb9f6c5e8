package harness

// What a machine's boot (nspawn.go) and a VM's (vm_qemu.go) share: a tied
// process whose console goes to console.log, waited on with a deadline
// until the system in it is up, and stopped in order, else killed.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// booting is the process that boots a machine or VM.
type booting struct {
	*tied
	console string // console.log: every boot's console, appended
	output  string // the process's own stdout and stderr when not the console (qemu.log)
}

// bootStep is one condition waitUp waits for, tried every `every`.
type bootStep struct {
	every time.Duration
	try   func(context.Context) (done bool, err error)
}

// waitUp waits until each step in turn is done (tied.poll), all within
// timeout. Its error ends with the console's tail, and the process's own
// output if that is elsewhere and the process has exited.
func (b *booting) waitUp(ctx context.Context, timeout time.Duration, steps ...bootStep) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range steps {
		if err := b.poll(ctx, s.every, s.try); err != nil {
			if gone, _ := b.exited(); gone && b.output != "" {
				out, _ := os.ReadFile(b.output)
				err = fmt.Errorf("%w\n%s:\n%s", err, b.output, tail(string(out), 2000))
			}
			return fmt.Errorf("%w\nconsole tail:\n%s", err, consoleTail(b.console, 30))
		}
	}
	return nil
}

// stop asks the system to go down (ask, said as how) and waits grace for
// the process to exit; past that it is killed, with inside (tied.kill).
func (b *booting) stop(how string, ask func(), grace time.Duration, inside ...procID) error {
	if gone, _ := b.exited(); gone {
		return nil
	}
	ask()
	select {
	case <-b.done:
		return nil
	case <-time.After(grace):
	}
	err := fmt.Errorf("%s (pid %d) still running %v after %s; killed it", b.what, b.id.pid, grace, how)
	return errors.Join(err, b.kill(inside...))
}

// systemUp reads systemctl is-system-running's answer: up when running or
// degraded. Degraded is logged with the failed units (listed by run), not
// an error: the host's packages are many and a test says what it needs.
// Maintenance (emergency or rescue mode) is an error no wait cures. who
// names the machine or VM in the log.
func systemUp(ctx context.Context, who, state string, run func(context.Context, ...string) (string, string, error), logf func(string, ...any)) (bool, error) {
	switch state {
	case "running":
		return true, nil
	case "degraded":
		failed, _, _ := run(ctx, "systemctl", "list-units", "--failed", "--no-legend", "--plain")
		logf("%s: degraded; failed units:\n%s", who, strings.TrimRight(failed, "\n"))
		return true, nil
	case "maintenance":
		return true, errors.New("systemctl is-system-running: maintenance (emergency or rescue mode)")
	}
	return false, nil
}

// consoleTail is the last n lines of the console log at path, all boots,
// without terminal colours or carriage returns.
func consoleTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(console: %v)", err)
	}
	return TailLines(strings.ReplaceAll(ansiRe.ReplaceAllString(string(b), ""), "\r", ""), n)
}

// TailLines is the last n lines of s.
func TailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
