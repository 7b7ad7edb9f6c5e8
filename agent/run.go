package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/flockrun/flock/wire"
)

// RunLimits bound one task's command. Zero fields take the defaults
// (DefaultTaskTimeout, DefaultMaxOutput): a task is never unbounded.
type RunLimits struct {
	Timeout   time.Duration
	MaxOutput int // bytes of stdout and stderr together
}

// killGrace is how long a command has between SIGTERM and SIGKILL, and
// how long RunCommand waits for pipes held open by processes that left
// the command's process group.
const killGrace = 2 * time.Second

// RunCommand runs argv (looked up on PATH) in dir with stdin as its
// standard input, in a process group of its own, and reports how it went.
// It never hangs: on timeout, cancellation of ctx or too much output the
// whole group is stopped (SIGTERM, SIGKILL after killGrace); when the
// command exits, what it left behind in its group is killed, so a
// background grandchild holding stdout cannot hold the result.
func RunCommand(ctx context.Context, argv []string, dir string, stdin []byte, lim RunLimits) (res wire.Result) {
	start := time.Now()
	defer func() { res.DurationMS = float64(time.Since(start).Microseconds()) / 1000 }()
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultTaskTimeout
	}
	if lim.MaxOutput <= 0 {
		lim.MaxOutput = DefaultMaxOutput
	}
	res.ExitStatus = -1
	if len(argv) == 0 {
		res.Error = "no command to run"
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Error = fmt.Sprintf("not started: %v", context.Cause(ctx))
		return res
	}
	p, err := startCommand(argv, dir, stdin, lim.MaxOutput)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	overflow := fmt.Sprintf("output exceeded max_output (%d bytes); the command was stopped", lim.MaxOutput)
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	var stopped string // why RunCommand stopped the command, if it did
	select {
	case <-p.exited:
	case <-timer.C:
		stopped = fmt.Sprintf("timed out after %s", lim.Timeout)
	case <-ctx.Done():
		stopped = fmt.Sprintf("stopped before it finished: %v", context.Cause(ctx))
	case <-p.cap.overflow:
		stopped = overflow
	}
	signaled := stopped != ""
	if signaled {
		p.stop()
	}
	waitErr := p.finish()

	res.Output, res.Stderr, res.Truncated = p.cap.result()
	if res.Truncated { // also when it overflowed as it exited or timed out
		stopped = overflow
	}
	st := p.cmd.ProcessState
	switch {
	case stopped != "":
		res.Error = stopped
		if !signaled && st != nil && st.Exited() { // overflowed as it exited
			res.ExitStatus = st.ExitCode()
		}
	case st == nil:
		res.Error = fmt.Sprintf("waiting for %s: %v", argv[0], waitErr)
	case st.Exited() && st.ExitCode() == 0:
		res.OK, res.ExitStatus = true, 0
	case st.Exited():
		res.ExitStatus = st.ExitCode()
		res.Error = fmt.Sprintf("exited with status %d", res.ExitStatus)
	default:
		res.Error = fmt.Sprintf("killed by signal: %v", st.Sys().(syscall.WaitStatus).Signal())
	}
	return res
}

// process is a started command and the goroutines around it.
type process struct {
	cmd     *exec.Cmd
	cap     *capture
	exited  chan struct{} // closed when Wait returned
	waitErr error
	readers sync.WaitGroup
	pipes   []*os.File // our read ends of stdout and stderr
}

func startCommand(argv []string, dir string, stdin []byte, limit int) (*process, error) {
	p := &process{cmd: exec.Command(argv[0], argv[1:]...), cap: newCapture(limit), exited: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdin = bytes.NewReader(stdin)
	// Our own pipes as *os.File, so Wait returns when the command exits,
	// not when every holder of stdout has closed it. Stdin stays exec's
	// copying goroutine, bounded by WaitDelay should a leftover hold it.
	p.cmd.WaitDelay = killGrace
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var writers []*os.File
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(p.pipes, writers)
			return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
		}
		p.pipes, writers = append(p.pipes, r), append(writers, w)
	}
	p.cmd.Stdout, p.cmd.Stderr = writers[0], writers[1]
	err := p.cmd.Start()
	closeAll(writers) // the child has its copies
	if err != nil {
		closeAll(p.pipes)
		return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	for i, r := range p.pipes {
		p.readers.Go(func() { p.cap.readAll(r, i == 1) })
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the command's group to end, then forces it.
func (p *process) stop() {
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(killGrace):
		p.signalGroup(syscall.SIGKILL)
		<-p.exited
	}
}

// finish waits for the command, kills what it left in its group, and
// collects its output, waiting at most killGrace for pipes still held by
// processes that escaped the group.
func (p *process) finish() error {
	<-p.exited
	p.signalGroup(syscall.SIGKILL)
	done := make(chan struct{})
	go func() { p.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killGrace):
		closeAll(p.pipes) // unblocks the readers
		<-done
	}
	closeAll(p.pipes)
	if errors.Is(p.waitErr, exec.ErrWaitDelay) {
		return nil // exited; only stdin was still held
	}
	return p.waitErr
}

// signalGroup signals the command's process group. The group's id is the
// leader's pid, which the kernel does not reuse while the group has members.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig) // ESRCH: the group is gone already
}

func closeAll(fileSets ...[]*os.File) {
	for _, fs := range fileSets {
		for _, f := range fs {
			_ = f.Close()
		}
	}
}
