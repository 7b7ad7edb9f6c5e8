package harness

// Files inside the machine, reached through its systemd's root
// (/proc/<pid>/root), so mounts inside (/run, /tmp) are seen. Paths are
// resolved with openat2(RESOLVE_IN_ROOT): a symlink inside the machine
// (/etc/resolv.conf -> /run/...) resolves in the machine, never on the
// host.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadFile reads path as seen inside the machine.
func (m *Machine) ReadFile(p string) ([]byte, error) {
	f, err := m.open(p, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("machine %s: read %s: %w", m.name, p, err)
	}
	return b, nil
}

// WriteFile writes path inside the machine as root, creating or
// truncating it, and leaves it with exactly mode (no umask). Its
// directory must exist.
func (m *Machine) WriteFile(p string, data []byte, mode os.FileMode) error {
	f, err := m.open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, uint32(mode.Perm()))
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Chmod(mode)
	if err := errors.Join(werr, cerr, f.Close()); err != nil {
		return fmt.Errorf("machine %s: write %s: %w", m.name, p, err)
	}
	return nil
}

func (m *Machine) open(p string, flags int, mode uint32) (*os.File, error) {
	if !path.IsAbs(p) {
		return nil, fmt.Errorf("machine %s: %q: want an absolute path inside the machine", m.name, p)
	}
	pid := m.PID()
	if pid == 0 {
		return nil, fmt.Errorf("machine %s: open %s: machine not running", m.name, p)
	}
	rootPath := "/proc/" + strconv.Itoa(pid) + "/root"
	root, err := unix.Open(rootPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("machine %s: open %s: %w", m.name, rootPath, err)
	}
	defer unix.Close(root)
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	var fd int
	for i := 0; ; i++ {
		// EAGAIN: a rename raced the lookup; the kernel asks to retry.
		fd, err = unix.Openat2(root, p, how)
		if !errors.Is(err, unix.EAGAIN) || i == 10 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("machine %s: open %s: %w", m.name, p, &os.PathError{Op: "openat2", Path: p, Err: err})
	}
	return os.NewFile(uintptr(fd), p), nil
}
