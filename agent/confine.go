package agent

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads w's filter on the calling thread
// (lock it first: exec keeps only this thread). The filter is inherited
// by every program exec'd and every process forked after it.
func (w Walls) Install() error {
	raw, err := w.Program()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// An unprivileged filter needs no_new_privs; the unit sets it too
	// (NoNewPrivileges=yes), setting it twice is harmless.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	runtime.KeepAlive(filter)
	return nil
}

// ConfineThenExec confines the calling thread, then execs argv with env
// plus mark=1 (scoped) or mark=0 (this kernel has no Landlock scopes,
// which it reports on stderr): the Landlock IPC scope (scopeThisThread) and
// w's seccomp filter, so the program and all it starts run
// inside both. It returns only on failure.
func ConfineThenExec(path string, argv, env []string, w Walls, mark string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	scoped := "1"
	if err := scopeThisThread(); errors.Is(err, ErrNoScopes) {
		fmt.Fprintln(os.Stderr, "flock-agent:", err)
		scoped = "0"
	} else if err != nil {
		return err
	}
	if err := w.Install(); err != nil {
		return err
	}
	if err := unix.Exec(path, argv, append(env, mark+"="+scoped)); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}
