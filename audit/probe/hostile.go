package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// More escapes, each a hole when it works. The kernel-facing ones try the
// call with arguments that do no harm where they work (the same host
// name, the current time, a module that is not one) and count it a hole
// when the kernel got past its permission check: EPERM, EACCES and ENOSYS
// (a seccomp filter's answer) are walls, any other answer is not.

func hostile(r Request) (string, error, bool) {
	switch r.Op {
	case "rename":
		// r.Path to r.Data and back: a hole when the first works.
		if err := os.Rename(r.Path, r.Data); err != nil {
			return "", err, true
		}
		os.Rename(r.Data, r.Path)
		return "renamed " + r.Path + " and back", nil, true
	case "hard-link":
		if err := os.Link(r.Path, r.Data); err != nil {
			return "", err, true
		}
		os.Remove(r.Data)
		return "linked " + r.Path + " as " + r.Data, nil, true
	case "append-file":
		f, err := os.OpenFile(r.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return "", err, true
		}
		defer f.Close()
		return "opened for append (nothing written)", nil, true
	case "ptrace":
		return ptrace(r.PID)
	case "userns":
		return userns()
	case "mount":
		return mountTmpfs()
	case "clock":
		return permitted("clock_settime", clockSet())
	case "hostname":
		return permitted("sethostname", sameHostname())
	case "module":
		// finit_module of no file: EBADF past the capability check.
		_, _, e := unix.Syscall(unix.SYS_FINIT_MODULE, ^uintptr(0), 0, 0)
		return permitted("finit_module", errnoOf(e))
	case "bpf":
		// A program load with an empty attribute: EINVAL past the check.
		var attr [64]byte
		_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr))
		return permitted("bpf(BPF_PROG_LOAD)", errnoOf(e))
	case "perf":
		return perf()
	case "io-uring":
		var params [120]byte
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if e == 0 {
			unix.Close(int(fd))
			return "io_uring ring set up", nil, true
		}
		return "", fmt.Errorf("io_uring_setup: %w", e), true
	case "raw-socket":
		return socket("AF_INET, SOCK_RAW", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	case "packet-socket":
		return socket("AF_PACKET", unix.AF_PACKET, unix.SOCK_RAW, 0)
	case "keyring":
		// The user keyring is per uid across the host; a session keyring
		// of its own (KeyringMode=private) is not a hole.
		id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, false)
		if err != nil {
			return "", fmt.Errorf("keyctl(GET_KEYRING_ID, user): %w", err), true
		}
		return fmt.Sprintf("user keyring %d reachable", id), nil, true
	}
	return "", nil, false
}

func errnoOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// permitted reads a kernel call's answer: only a wall's errno is a refusal.
func permitted(call string, err error) (string, error, bool) {
	if err == nil {
		return call + " succeeded", nil, true
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
		return "", fmt.Errorf("%s: %w", call, err), true
	}
	return fmt.Sprintf("%s got past the permission check (%v)", call, err), nil, true
}

func socket(what string, domain, typ, proto int) (string, error, bool) {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return "", fmt.Errorf("socket(%s): %w", what, err), true
	}
	unix.Close(fd)
	return what + " socket open", nil, true
}

func clockSet() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return err
	}
	return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
}

func sameHostname() error {
	name, err := os.Hostname()
	if err != nil {
		return err
	}
	return unix.Sethostname([]byte(name))
}

// ptrace attaches to pid and lets go at once; ptrace wants one thread.
func ptrace(pid int) (string, error, bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		return "", fmt.Errorf("ptrace(PTRACE_SEIZE, %d): %w", pid, err), true
	}
	unix.PtraceDetach(pid)
	return fmt.Sprintf("seized pid %d (and let go)", pid), nil, true
}

// userns starts a child in a new user namespace: a Go process has threads,
// so unshare(2) of its own cannot.
func userns() (string, error, bool) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	cmd := exec.Command(self, "--flock-probe-noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("clone(CLONE_NEWUSER): %w", err), true
	}
	cmd.Wait()
	return "child started in a new user namespace", nil, true
}

// mountTmpfs mounts a tmpfs on a fresh directory and unmounts it.
func mountTmpfs() (string, error, bool) {
	dir, err := os.MkdirTemp("", "flock-probe-mount")
	if err != nil {
		return "", err, true
	}
	defer os.Remove(dir)
	if err := unix.Mount("flock-probe", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", filepath.Base(dir), err), true
	}
	unix.Unmount(dir, unix.MNT_DETACH)
	return "mounted a tmpfs (and unmounted it)", nil, true
}

// perf opens a software counter on itself, user space only: what
// perf_event_paranoid 2 still allows an unprivileged process.
func perf() (string, error, bool) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Bits: unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("perf_event_open: %w", err), true
	}
	unix.Close(fd)
	return "perf event opened", nil, true
}
