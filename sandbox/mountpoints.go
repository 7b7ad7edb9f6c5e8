package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// EnsureMountPoints creates in rootfs the mount points that are missing:
// empty directories (0755) and empty files (0644), root's, as podman does
// for its own --rootfs. It never follows a symlink in the rootfs, which
// could point anywhere on the host.
//
// Several agents share a rootfs and start at once, so each is made with
// its mode at once (umask 022 while they are made): under the unit's
// umask 077 another agent's launcher could find one 0600 before its
// chmod, and runsc's gofer, walking as the agent, could not open it. An
// empty file of root's that others cannot read is a mount point made so
// before (by crun, which makes them 0700, or by an older flock-agent):
// it is made 0644, or every gVisor agent of the rootfs failed at every
// start. Each launcher calls this once, before it starts any thread of
// its own that makes files.
func EnsureMountPoints(rootfs string, mps []Mount) error {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, m := range mps {
		if err := ensureMountPoint(rootfs, m.Dest, m.File); err != nil {
			return fmt.Errorf("sandbox: mount point %s in rootfs %s: %w", m.Dest, rootfs, err)
		}
	}
	return nil
}

// madeMountPoint is told of each path made, before its chmod: what
// another launcher could see then (a test's seam).
var madeMountPoint = func(path string) {}

func ensureMountPoint(rootfs, dest string, file bool) error {
	parts := strings.Split(strings.Trim(filepath.Clean(dest), "/"), "/")
	p := rootfs
	for i, part := range parts {
		p = filepath.Join(p, part)
		last := i == len(parts)-1
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; flock does not create mount points through one (make it a directory)", p)
		case err == nil && last && file != fi.Mode().IsRegular():
			return fmt.Errorf("%s exists but is not a %s", p, map[bool]string{true: "file", false: "directory"}[file])
		case err == nil && !last && !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		case err == nil && last && file && unreadablePlaceholder(fi):
			if err := os.Chmod(p, 0o644); err != nil {
				return err
			}
		case err == nil:
		case !os.IsNotExist(err):
			return err
		case last && file:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			madeMountPoint(p)
			if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
				return err
			}
		default:
			if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			madeMountPoint(p)
			// Whatever the umask: runsc's gofer, as the agent's uid,
			// walks these.
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// unreadablePlaceholder says whether fi is an empty file of root's that
// others cannot read: a mount point made without the mode a gofer needs.
func unreadablePlaceholder(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0 && fi.Size() == 0 && fi.Mode().Perm()&0o044 != 0o044
}
