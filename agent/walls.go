package agent

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Walls are what flock-agent's seccomp filter refuses the agent's program
// at every level, before it execs it (docs/design.md, "Walls flock-agent
// adds"). At level process systemd already closes most of them; in a
// podman container or gVisor sandbox nothing else does: netlink sockets
// that read the host's interfaces and routes, set-id bits on the agent's
// own files, W+X memory, io_uring, personality changes. A refused call
// gets an errno, never a kill, so programs that probe (libc's netlink
// check, a JIT's W+X test) fall back as they would on a stricter host.
type Walls struct {
	// JIT lets the program map memory writable and executable at once
	// (spec jit: true), as V8 and the JVM do.
	JIT bool
}

// Offsets in struct seccomp_data: nr, arch, then six 64-bit arguments.
// Loads are 32-bit: an argument's low word is at argLo on a little-endian
// machine, and every argument checked is an int or a mode the kernel
// truncates to 32 bits.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLo(i int) uint32 { return uint32(offArgs + 8*i) }

// Return values of the filter.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retErrno = unix.SECCOMP_RET_ERRNO
)

func refuse(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: retErrno | uint32(e)&unix.SECCOMP_RET_DATA}
}

var allow = bpf.RetConstant{Val: retAllow}

// setID is S_ISUID|S_ISGID: a mode with either is refused.
const setID = unix.S_ISUID | unix.S_ISGID

// rule is one system call's check: a block run with its number matched,
// which ends in a return on every path.
type rule struct {
	nr    uint32
	block []bpf.Instruction
}

// always refuses the call with e.
func always(nr uint32, e unix.Errno) rule { return rule{nr, []bpf.Instruction{refuse(e)}} }

// families refuses socket(2)/socketpair(2) families other than ok (arg 0).
func families(nr uint32, ok ...uint32) rule {
	b := []bpf.Instruction{bpf.LoadAbsolute{Off: argLo(0), Size: 4}}
	for i, f := range ok {
		// skip the remaining compares and the refusal to reach allow
		b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipTrue: uint8(len(ok) - i)})
	}
	return rule{nr, append(b, refuse(unix.EAFNOSUPPORT), allow)}
}

// modeArg refuses a mode (arg i) with a set-id bit.
func modeArg(nr uint32, i int) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(i), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setID, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// createMode refuses an open that creates (flags arg f has O_CREAT or
// O_TMPFILE) with a set-id bit in its mode (arg m); without them the mode
// register is whatever libc left there and is not read.
func createMode(nr uint32, f, m int) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(f), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.O_CREAT | oTmpfileBit, SkipFalse: 3},
		bpf.LoadAbsolute{Off: argLo(m), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setID, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// oTmpfileBit is __O_TMPFILE, the bit O_TMPFILE adds to O_DIRECTORY.
const oTmpfileBit = unix.O_TMPFILE &^ unix.O_DIRECTORY

// protWX refuses a protection (arg 2) both writable and executable; with
// protExec on mprotect and shmExec this is systemd's
// MemoryDenyWriteExecute, rule for rule.
func protWX(nr uint32) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: unix.PROT_WRITE | unix.PROT_EXEC},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PROT_WRITE | unix.PROT_EXEC, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// protExec refuses a protection (arg 2) that adds execute: memory
// written first and made executable after is W+X in two steps.
func protExec(nr uint32) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.PROT_EXEC, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// shmExec refuses attaching System V shared memory executable (arg 2).
func shmExec(nr uint32) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: shmExecFlag, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// shmExecFlag is SHM_EXEC.
const shmExecFlag = 0o100000

// personality allows only reading it (0xffffffff) and setting the default
// (PER_LINUX), as systemd's LockPersonality does on a default host.
func personality(nr uint32) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// nsFlags are the CLONE_NEW* bits: a new namespace of any kind.
const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// newNamespace refuses flags (arg 0 of unshare, and of clone on x86-64)
// asking for a namespace: a user namespace gives an unprivileged
// program the kernel's root-only code (mounts, nftables, ...) to attack.
// systemd's RestrictNamespaces= does this at level process; in a podman
// container nothing else did (flockctl audit found it).
func newNamespace(nr uint32) rule {
	return rule{nr, []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
		refuse(unix.EPERM),
		allow,
	}}
}

// ErrNoWalls means flock-agent has no filter for this architecture.
var ErrNoWalls = errors.New("flock-agent has no seccomp filter for this architecture (amd64 only) and runs no agent without its walls")

// Program is the filter: the architecture first (a call of any other ABI,
// i386 by int 0x80 or x32, is refused with ENOSYS: every check below
// reads x86-64 numbers), then each rule, then allow.
func (w Walls) Program() ([]bpf.RawInstruction, error) {
	arch, rules, ok := archRules(w)
	if !ok {
		return nil, ErrNoWalls
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		refuse(unix.ENOSYS),
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		refuse(unix.ENOSYS),
	}
	for _, r := range rules {
		if len(r.block) > 255 {
			return nil, fmt.Errorf("seccomp rule for call %d: block too long", r.nr)
		}
		// A block always returns, so a miss skips it with nr still in A.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(r.block))})
		prog = append(prog, r.block...)
	}
	prog = append(prog, allow)
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp filter has %d instructions, the kernel takes %d", len(prog), unix.BPF_MAXINSNS)
	}
	return bpf.Assemble(prog)
}

// x32Bit marks the x32 ABI's numbers, which share AUDIT_ARCH_X86_64.
const x32Bit = 0x40000000
