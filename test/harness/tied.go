package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// tied is a child (nspawn, qemu, the ssh master) that dies with the test
// process and is reaped by a goroutine of its own.
type tied struct {
	cmd     *exec.Cmd
	what    string        // its program's name, for errors
	id      procID        // checked against PID reuse
	done    chan struct{} // closed when the child has exited and been reaped
	waitErr error         // its exit, valid after done
}

// killWait bounds the wait for a child after SIGKILL.
const killWait = 10 * time.Second

// startTied starts cmd in its own process group (a ^C at the terminal
// goes to the test, whose cleanup stops the child in order) with SIGTERM
// as its parent-death signal (the test died without cleanup: the child
// quits instead of living on). pidFile, if not "", records the child's
// procID for the sweep of stale directories (workdir.go).
func startTied(cmd *exec.Cmd, pidFile string) (*tied, error) {
	return startTiedAs(cmd, pidFile, &syscall.SysProcAttr{Setpgid: true})
}

// startTiedAs is startTied with the child's own attributes (its session or
// group), SIGTERM always its parent-death signal.
func startTiedAs(cmd *exec.Cmd, pidFile string, attr *syscall.SysProcAttr) (*tied, error) {
	attr.Pdeathsig = syscall.SIGTERM
	cmd.SysProcAttr = attr
	t := &tied{cmd: cmd, what: filepath.Base(cmd.Path), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the forking *thread* exits,
		// and Go may end a thread under a running test: fork from a
		// thread of our own, kept until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		t.waitErr = cmd.Wait()
		close(t.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	var err error
	if t.id, err = procOf(cmd.Process.Pid); err != nil {
		t.id = procID{pid: cmd.Process.Pid} // already gone: exited says how
	}
	if pidFile != "" {
		if err := os.WriteFile(pidFile, []byte(t.id.String()+"\n"), 0o644); err != nil {
			return nil, errors.Join(err, t.kill())
		}
	}
	return t, nil
}

// exited reports the child's exit if it has exited.
func (t *tied) exited() (bool, error) {
	select {
	case <-t.done:
		if t.waitErr == nil {
			return true, fmt.Errorf("%s (pid %d) exited", t.what, t.id.pid)
		}
		return true, fmt.Errorf("%s (pid %d) exited: %w", t.what, t.id.pid, t.waitErr)
	default:
		return false, nil
	}
}

// kill ends the child through its exec.Cmd (a pidfd or Wait's
// bookkeeping: never a reused PID), and the processes inside it that must
// not outlive it (checked against reuse), and waits for the child.
func (t *tied) kill(inside ...procID) error {
	_ = t.cmd.Process.Kill() // "process already finished" is fine
	for _, p := range inside {
		if p.pid > 0 && p.alive() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	select {
	case <-t.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) still running %v after SIGKILL", t.what, t.id.pid, killWait)
	}
}

// poll calls try every `every` until it says done (its error, if any, is
// final), the child exits, or ctx ends; then the error names try's last
// answer (why not yet).
func (t *tied) poll(ctx context.Context, every time.Duration, try func(context.Context) (done bool, err error)) error {
	t0 := time.Now()
	for {
		if gone, err := t.exited(); gone {
			return err
		}
		done, err := try(ctx)
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w; last: %v", time.Since(t0).Round(time.Millisecond), ctx.Err(), err)
		case <-t.done:
		case <-time.After(every):
		}
	}
}
