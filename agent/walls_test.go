package agent

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data as the x/net/bpf VM reads it: its
// loads are big-endian, so each 32-bit word is stored big-endian at the
// offset where the kernel's native load finds it (an argument's low word
// first, as on a little-endian machine).
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[argLo(i):], uint32(a))
		binary.BigEndian.PutUint32(b[argLo(i)+4:], uint32(a>>32))
	}
	return b
}

// Tier: unit. Each call with its arguments, through the assembled filter
// in x/net/bpf's VM: allowed, or refused with which errno.
func TestWallsProgram(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the walls are written for amd64")
	}
	const x86 = unix.AUDIT_ARCH_X86_64
	ok := uint32(retAllow)
	no := func(e unix.Errno) uint32 { return retErrno | uint32(e) }
	for _, tc := range []struct {
		name string
		jit  bool
		data []byte
		want uint32
	}{
		{"tcp socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM), ok},
		{"udp6 socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM), ok},
		{"unix socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM), ok},
		{"netlink socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE), no(unix.EAFNOSUPPORT)},
		{"packet socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW), no(unix.EAFNOSUPPORT)},
		{"vsock socket", false, seccompData(x86, unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM), no(unix.EAFNOSUPPORT)},
		{"netlink high word ignored", false, seccompData(x86, unix.SYS_SOCKET, 1<<32|unix.AF_NETLINK), no(unix.EAFNOSUPPORT)},
		{"unix socketpair", false, seccompData(x86, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM), ok},
		{"netlink socketpair", false, seccompData(x86, unix.SYS_SOCKETPAIR, unix.AF_NETLINK, unix.SOCK_RAW), no(unix.EAFNOSUPPORT)},
		{"chmod 0755", false, seccompData(x86, unix.SYS_CHMOD, 0, 0o755), ok},
		{"chmod u+s", false, seccompData(x86, unix.SYS_CHMOD, 0, 0o4755), no(unix.EPERM)},
		{"chmod g+s", false, seccompData(x86, unix.SYS_CHMOD, 0, 0o2755), no(unix.EPERM)},
		{"chmod sticky", false, seccompData(x86, unix.SYS_CHMOD, 0, 0o1777), ok},
		{"fchmod u+s", false, seccompData(x86, unix.SYS_FCHMOD, 3, 0o4700), no(unix.EPERM)},
		{"fchmodat u+s", false, seccompData(x86, unix.SYS_FCHMODAT, 3, 0, 0o4700), no(unix.EPERM)},
		{"fchmodat 0600", false, seccompData(x86, unix.SYS_FCHMODAT, 3, 0, 0o600), ok},
		{"fchmodat2 g+s", false, seccompData(x86, unix.SYS_FCHMODAT2, 3, 0, 0o2700, 0), no(unix.EPERM)},
		{"creat u+s", false, seccompData(x86, unix.SYS_CREAT, 0, 0o4755), no(unix.EPERM)},
		{"open create u+s", false, seccompData(x86, unix.SYS_OPEN, 0, unix.O_CREAT|unix.O_WRONLY, 0o4755), no(unix.EPERM)},
		{"open create 0644", false, seccompData(x86, unix.SYS_OPEN, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), ok},
		{"open no create, mode garbage", false, seccompData(x86, unix.SYS_OPEN, 0, unix.O_RDONLY, 0o6777), ok},
		{"openat create g+s", false, seccompData(x86, unix.SYS_OPENAT, 3, 0, unix.O_CREAT|unix.O_RDWR, 0o2755), no(unix.EPERM)},
		{"openat tmpfile u+s", false, seccompData(x86, unix.SYS_OPENAT, 3, 0, unix.O_TMPFILE|unix.O_RDWR, 0o4755), no(unix.EPERM)},
		{"openat read", false, seccompData(x86, unix.SYS_OPENAT, 3, 0, unix.O_RDONLY, 0o4755), ok},
		{"openat2", false, seccompData(x86, unix.SYS_OPENAT2, 3, 0, 0, 24), no(unix.ENOSYS)},
		{"mkdir g+s", false, seccompData(x86, unix.SYS_MKDIR, 0, 0o2755), no(unix.EPERM)},
		{"mkdirat 0700", false, seccompData(x86, unix.SYS_MKDIRAT, 3, 0, 0o700), ok},
		{"mknodat u+s", false, seccompData(x86, unix.SYS_MKNODAT, 3, 0, unix.S_IFREG|0o4755, 0), no(unix.EPERM)},
		{"mknod fifo", false, seccompData(x86, unix.SYS_MKNOD, 0, unix.S_IFIFO|0o600, 0), ok},
		{"personality query", false, seccompData(x86, unix.SYS_PERSONALITY, 0xffffffff), ok},
		{"personality linux", false, seccompData(x86, unix.SYS_PERSONALITY, 0), ok},
		{"personality no aslr", false, seccompData(x86, unix.SYS_PERSONALITY, 0x0040000), no(unix.EPERM)},
		{"io_uring_setup", false, seccompData(x86, unix.SYS_IO_URING_SETUP, 8, 0), no(unix.EPERM)},
		{"io_uring_enter", true, seccompData(x86, unix.SYS_IO_URING_ENTER), no(unix.EPERM)},
		{"io_uring_register", false, seccompData(x86, unix.SYS_IO_URING_REGISTER), no(unix.EPERM)},
		{"unshare user", false, seccompData(x86, unix.SYS_UNSHARE, unix.CLONE_NEWUSER), no(unix.EPERM)},
		{"unshare mount", true, seccompData(x86, unix.SYS_UNSHARE, unix.CLONE_NEWNS), no(unix.EPERM)},
		{"unshare files", false, seccompData(x86, unix.SYS_UNSHARE, unix.CLONE_FILES), ok},
		{"clone a thread", false, seccompData(x86, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM), ok},
		{"clone a new net namespace", false, seccompData(x86, unix.SYS_CLONE, unix.CLONE_NEWNET|uint64(unix.SIGCHLD)), no(unix.EPERM)},
		{"clone3", false, seccompData(x86, unix.SYS_CLONE3, 0, 88), no(unix.ENOSYS)},
		{"mmap rw", false, seccompData(x86, unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_WRITE), ok},
		{"mmap rx", false, seccompData(x86, unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_EXEC), ok},
		{"mmap rwx", false, seccompData(x86, unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), no(unix.EPERM)},
		{"mmap wx", false, seccompData(x86, unix.SYS_MMAP, 0, 4096, unix.PROT_WRITE|unix.PROT_EXEC), no(unix.EPERM)},
		{"mmap rwx jit", true, seccompData(x86, unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), ok},
		{"mprotect rwx", false, seccompData(x86, unix.SYS_MPROTECT, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), no(unix.EPERM)},
		{"mprotect rwx jit", true, seccompData(x86, unix.SYS_MPROTECT, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), ok},
		{"mprotect rx (W then X)", false, seccompData(x86, unix.SYS_MPROTECT, 0, 4096, unix.PROT_READ|unix.PROT_EXEC), no(unix.EPERM)},
		{"mprotect rw", false, seccompData(x86, unix.SYS_MPROTECT, 0, 4096, unix.PROT_READ|unix.PROT_WRITE), ok},
		{"mprotect rx jit", true, seccompData(x86, unix.SYS_MPROTECT, 0, 4096, unix.PROT_READ|unix.PROT_EXEC), ok},
		{"shmat exec", false, seccompData(x86, unix.SYS_SHMAT, 1, 0, shmExecFlag), no(unix.EPERM)},
		{"shmat read", false, seccompData(x86, unix.SYS_SHMAT, 1, 0, unix.SHM_RDONLY), ok},
		{"pkey_mprotect rwx", false, seccompData(x86, unix.SYS_PKEY_MPROTECT, 0, 4096, unix.PROT_WRITE|unix.PROT_EXEC, 0), no(unix.EPERM)},
		{"read", false, seccompData(x86, unix.SYS_READ, 0, 0, 0), ok},
		{"x32 socket", false, seccompData(x86, x32Bit|unix.SYS_SOCKET, unix.AF_NETLINK), no(unix.ENOSYS)},
		{"i386 call", false, seccompData(unix.AUDIT_ARCH_I386, 102), no(unix.ENOSYS)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := Walls{JIT: tc.jit}.Program()
			if err != nil {
				t.Fatal(err)
			}
			prog, allDecoded := bpf.Disassemble(raw)
			if !allDecoded {
				t.Fatal("the program does not disassemble")
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatal(err)
			}
			got, err := vm.Run(tc.data)
			if err != nil || uint32(got) != tc.want {
				t.Errorf("filter answers %#x, %v; want %#x", uint32(got), err, tc.want)
			}
		})
	}
}

// wallsChild is set in the environment of the test binary re-run as the
// child that installs the filter: "jit", "nojit", or "none" (the control).
const wallsChild = "FLOCK_TEST_WALLS_CHILD"

// Tier: unit (Linux, any user). The filter on the running kernel: a child
// installs it and tries each escape; the control child, without it, must
// succeed at every one the filter refuses, so each probe can fail.
func TestWallsOnKernel(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the walls are written for amd64")
	}
	refused := map[string]unix.Errno{
		"netlink-route": unix.EAFNOSUPPORT, "packet": unix.EAFNOSUPPORT,
		"chmod-setuid": unix.EPERM, "chmod-setgid": unix.EPERM, "open-create-setuid": unix.EPERM,
		"mkdir-setgid": unix.EPERM, "mmap-rwx": unix.EPERM, "mprotect-rwx": unix.EPERM, "mprotect-rx": unix.EPERM,
		"io_uring_setup": unix.EPERM, "personality-linux32": unix.EPERM, "openat2": unix.ENOSYS,
	}
	allowed := []string{"tcp", "udp6", "socketpair-unix", "chmod-0755", "open-create-0644", "mmap-rw", "personality-query"}
	// What the control must be able to do; packet sockets need root and
	// io_uring may be switched off by sysctl, so those two are not here.
	control := []string{"netlink-route", "chmod-setuid", "chmod-setgid", "open-create-setuid", "mmap-rwx", "mprotect-rwx", "mprotect-rx", "personality-linux32", "openat2"}
	for _, mode := range []string{"nojit", "jit", "none"} {
		t.Run(mode, func(t *testing.T) {
			got := runWallsChild(t, mode)
			check := func(name string, want unix.Errno) {
				if e, ok := got[name]; !ok {
					t.Errorf("%s: not tried", name)
				} else if unix.Errno(e) != want {
					t.Errorf("%s: errno %d (%v), want %d (%v)", name, e, unix.Errno(e), want, want)
				}
			}
			switch mode {
			case "none":
				for _, n := range control {
					check(n, 0)
				}
			default:
				for n, e := range refused {
					if mode == "jit" && (n == "mmap-rwx" || n == "mprotect-rwx" || n == "mprotect-rx") {
						e = 0
					}
					check(n, e)
				}
				for _, n := range allowed {
					check(n, 0)
				}
			}
		})
	}
}

func runWallsChild(t *testing.T, mode string) map[string]uintptr {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWallsChild$")
	cmd.Env = append(os.Environ(), wallsChild+"="+mode, "FLOCK_TEST_WALLS_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got map[string]uintptr
	for _, line := range splitLines(out) {
		if json.Unmarshal(line, &got) == nil && got != nil {
			return got
		}
	}
	t.Fatalf("child printed no results:\n%s", out)
	return nil
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

// TestWallsChild is the child of TestWallsOnKernel, nothing by itself: it
// installs the filter on its locked thread and makes each call there,
// printing each call's errno as JSON.
func TestWallsChild(t *testing.T) {
	mode := os.Getenv(wallsChild)
	if mode == "" {
		t.Skip("run by TestWallsOnKernel")
	}
	runtime.LockOSThread() // the filter binds this thread: every call below is made on it
	dir := os.Getenv("FLOCK_TEST_WALLS_DIR")
	if mode != "none" {
		if err := (Walls{JIT: mode == "jit"}).Install(); err != nil {
			t.Fatal(err)
		}
	}
	res := map[string]uintptr{}
	sock := func(name string, nr, fam, typ, proto uintptr) {
		fd, _, e := unix.RawSyscall6(nr, fam, typ, proto, 0, 0, 0)
		res[name] = uintptr(e)
		if e == 0 {
			unix.Close(int(fd))
		}
	}
	sock("netlink-route", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	sock("packet", unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)
	sock("tcp", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)
	sock("udp6", unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, 0)
	var pair [2]int32
	_, _, e := unix.RawSyscall6(unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&pair)), 0, 0)
	res["socketpair-unix"] = uintptr(e)

	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errno := func(err error) uintptr {
		if err == nil {
			return 0
		}
		if e, ok := err.(unix.Errno); ok {
			return uintptr(e)
		}
		return 1 << 20
	}
	res["chmod-setuid"] = errno(unix.Chmod(file, 0o4755))
	res["chmod-setgid"] = errno(unix.Fchmodat(unix.AT_FDCWD, file, 0o2755, 0))
	res["chmod-0755"] = errno(unix.Chmod(file, 0o755))
	fd, err := unix.Open(filepath.Join(dir, "suid"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	res["open-create-setuid"] = errno(err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Open(filepath.Join(dir, "plain"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	res["open-create-0644"] = errno(err)
	if err == nil {
		unix.Close(fd)
	}
	res["mkdir-setgid"] = errno(unix.Mkdir(filepath.Join(dir, "d"), 0o2755))

	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	res["mmap-rwx"] = errno(err)
	if err == nil {
		unix.Munmap(mem)
	}
	mem, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	res["mmap-rw"] = errno(err)
	if err == nil {
		res["mprotect-rwx"] = errno(unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC))
		res["mprotect-rx"] = errno(unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC))
		unix.Munmap(mem)
	}

	var params [120]byte // struct io_uring_params
	ring, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	res["io_uring_setup"] = uintptr(e)
	if e == 0 {
		unix.Close(int(ring))
	}
	old, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	res["personality-query"] = uintptr(e)
	_, _, e = unix.RawSyscall(unix.SYS_PERSONALITY, 0x0008, 0, 0) // PER_LINUX32
	res["personality-linux32"] = uintptr(e)
	if e == 0 {
		unix.RawSyscall(unix.SYS_PERSONALITY, old, 0, 0)
	}
	atFDCWD := unix.AT_FDCWD
	how := unix.OpenHow{Flags: unix.O_RDONLY}
	path, _ := unix.BytePtrFromString(file)
	fd2, _, e := unix.RawSyscall6(unix.SYS_OPENAT2, uintptr(atFDCWD), uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
	res["openat2"] = uintptr(e)
	if e == 0 {
		unix.Close(int(fd2))
	}
	b, _ := json.Marshal(res)
	os.Stdout.Write(append([]byte("\n"), append(b, '\n')...))
}
