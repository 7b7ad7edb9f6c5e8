package agent

import (
	"golang.org/x/sys/unix"
)

// archRules are the x86-64 numbers of the calls Walls checks.
func archRules(w Walls) (arch uint32, rules []rule, ok bool) {
	rules = []rule{
		families(unix.SYS_SOCKET, unix.AF_INET, unix.AF_INET6, unix.AF_UNIX),
		families(unix.SYS_SOCKETPAIR, unix.AF_INET, unix.AF_INET6, unix.AF_UNIX),
		modeArg(unix.SYS_CHMOD, 1),
		modeArg(unix.SYS_FCHMOD, 1),
		modeArg(unix.SYS_FCHMODAT, 2),
		modeArg(unix.SYS_FCHMODAT2, 2),
		modeArg(unix.SYS_CREAT, 1),
		createMode(unix.SYS_OPEN, 1, 2),
		createMode(unix.SYS_OPENAT, 2, 3),
		// openat2's mode is in a struct the filter cannot read: ENOSYS
		// makes libc and Go fall back to openat, which is checked.
		always(unix.SYS_OPENAT2, unix.ENOSYS),
		modeArg(unix.SYS_MKDIR, 1),
		modeArg(unix.SYS_MKDIRAT, 2),
		modeArg(unix.SYS_MKNOD, 1),
		modeArg(unix.SYS_MKNODAT, 2),
		personality(unix.SYS_PERSONALITY),
		always(unix.SYS_IO_URING_SETUP, unix.EPERM),
		always(unix.SYS_IO_URING_ENTER, unix.EPERM),
		always(unix.SYS_IO_URING_REGISTER, unix.EPERM),
		newNamespace(unix.SYS_UNSHARE),
		newNamespace(unix.SYS_CLONE),
		// clone3's flags are in a struct the filter cannot read: ENOSYS
		// makes glibc fall back to clone, which is checked (as podman's
		// and Docker's default profiles do).
		always(unix.SYS_CLONE3, unix.ENOSYS),
	}
	if !w.JIT {
		rules = append(rules, protWX(unix.SYS_MMAP), protExec(unix.SYS_MPROTECT), protExec(unix.SYS_PKEY_MPROTECT), shmExec(unix.SYS_SHMAT))
	}
	return unix.AUDIT_ARCH_X86_64, rules, true
}
