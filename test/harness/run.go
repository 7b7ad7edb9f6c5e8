package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runEnv is the whole environment of a command in the machine: nothing of
// the test process's leaks in, and systemctl & co. neither page nor colour.
var runEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"TERM=dumb",
	"SYSTEMD_PAGER=",
	"SYSTEMD_COLORS=0",
}

// RunError is a command in the machine that failed: it did not start, was
// killed, or exited non-zero.
type RunError struct {
	Machine  string
	Argv     []string
	ExitCode int    // -1 when it did not exit by itself
	Stderr   string // its tail
	Err      error  // from os/exec, and ctx's error when ctx ended it
}

func (e *RunError) Error() string {
	s := fmt.Sprintf("machine %s: %s: %v", e.Machine, quoteArgv(e.Argv), e.Err)
	if e.Stderr != "" {
		s += "; stderr: " + e.Stderr
	}
	return s
}

func (e *RunError) Unwrap() error { return e.Err }

// Run runs argv in the machine as root, in all of its namespaces, with a
// clean environment (runEnv) and empty stdin. ctx bounds it: when ctx ends
// the whole command is killed. err is a *RunError when the command fails.
func (m *Machine) Run(ctx context.Context, argv ...string) (stdout, stderr string, err error) {
	m.mu.Lock()
	b := m.cur
	m.mu.Unlock()
	if b == nil {
		return "", "", &RunError{Machine: m.name, Argv: argv, ExitCode: -1, Err: errors.New("machine not running")}
	}
	if gone, err := b.exited(); gone {
		return "", "", &RunError{Machine: m.name, Argv: argv, ExitCode: -1, Err: err}
	}
	return m.run(ctx, b, argv)
}

func (m *Machine) run(ctx context.Context, b *boot, argv []string) (string, string, error) {
	if len(argv) == 0 {
		return "", "", &RunError{Machine: m.name, ExitCode: -1, Err: errors.New("empty argv")}
	}
	nsArgv := append([]string{"-t", strconv.Itoa(b.init.pid), "-a", "--"}, argv...)
	cmd := exec.CommandContext(ctx, m.nsenter, nsArgv...)
	cmd.Env = runEnv
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// nsenter forks to enter the PID namespace and does not pass signals
	// on, so a timeout kills the command's whole process group. But not
	// nsenter itself: it must outlive its child to reap it. A child that
	// loses nsenter is reparented to a subreaper on the host, which may
	// leave it a zombie for seconds; the machine's systemd sees it and,
	// when it shuts down, waits 10 s for it to die (seen here).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killGroupBut(cmd.Process.Pid, cmd.Process.Pid); return nil }
	// Past this, os/exec kills nsenter itself (cancelled and stuck), or
	// stops waiting for a daemon started by the command that holds
	// stdout open after the command is done.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	err = runError(ctx, m.name, argv, err, errOut.String())
	return out.String(), errOut.String(), err
}

// runError is a command's error from cmd.Run as a *RunError, nil if it
// exited 0 (os/exec's ErrWaitDelay: only a leftover held the pipes).
func runError(ctx context.Context, machine string, argv []string, err error, stderr string) error {
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	re := &RunError{Machine: machine, Argv: argv, ExitCode: -1, Stderr: tail(stderr, 2000), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		re.ExitCode = ee.ExitCode()
	}
	if ctx.Err() != nil {
		re.Err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return re
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$*?;&|<>()") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// ansiRe matches terminal colour sequences, as systemd writes them to the
// console.
var ansiRe = regexp.MustCompile(`\x1b\[[0-9;]*[a-zA-Z]`)

// killGroupBut SIGKILLs every process of process group pgid except one.
func killGroupBut(pgid, except int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except {
			continue
		}
		if pgrp(pid) == pgid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
