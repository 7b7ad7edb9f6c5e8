package harness

import (
	"os/exec"
	"runtime"
	"syscall"
)

// tied is a child (nspawn, qemu) that dies with the test process and is
// reaped by a goroutine of its own.
type tied struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when the child has exited and been reaped
	waitErr error         // its exit, valid after done
}

// startTied starts cmd in its own process group (a ^C at the terminal
// goes to the test, whose cleanup stops the child in order) with SIGTERM
// as its parent-death signal (the test died without cleanup: the child
// quits instead of living on).
func startTied(cmd *exec.Cmd) (*tied, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	t := &tied{cmd: cmd, done: make(chan struct{})}
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
	return t, <-started
}
