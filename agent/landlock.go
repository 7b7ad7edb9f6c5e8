package agent

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ScopeABI is the first Landlock ABI with IPC scopes (kernel 6.12).
const ScopeABI = 6

// rulesetAttr is struct landlock_ruleset_attr up to .scoped (ABI 6); the
// kernel takes the size we pass, so newer fields may stay off.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// ErrNoScopes means the kernel has no Landlock IPC scopes.
var ErrNoScopes = errors.New("this kernel has no Landlock IPC scopes (needs Linux 6.12+): abstract UNIX sockets are shared with the host")

// IPCScopesSupported reports whether this kernel can scope abstract UNIX
// sockets and signals (Landlock ABI 6, Linux 6.12+).
func IPCScopesSupported() bool { return LandlockABI() >= ScopeABI }

// LandlockABI is the Landlock ABI this kernel offers; 0 when it has none
// (or Landlock is not enabled at boot).
func LandlockABI() int {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(abi)
}

// scopeThisThread confines the calling thread to a Landlock domain of its
// own for abstract UNIX sockets and signals, so the program it then execs
// and all that starts can connect to, and signal, only processes of that
// domain. Two agents thus cannot meet through an abstract socket, which
// lives in the host's network namespace where no mount or user namespace
// reaches, and systemd has no property for it. Landlock binds a thread and
// execve keeps only the calling thread, so restricting and exec'ing on one
// locked thread (ConfineThenExec) covers the whole program.
// ErrNoScopes where the kernel lacks scopes.
func scopeThisThread() error {
	if !IPCScopesSupported() {
		return ErrNoScopes
	}
	attr := rulesetAttr{scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset(scoped): %w", errno)
	}
	defer unix.Close(int(fd))
	// Unprivileged self-restriction needs no_new_privs; the unit sets it
	// too (NoNewPrivileges=yes), setting it twice is harmless.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
