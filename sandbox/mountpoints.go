package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnsureMountPoints creates in rootfs the mount points that are missing:
// empty directories (0755) and empty files (0644), root's, as podman does
// for its own --rootfs. It never follows a symlink in the rootfs, which
// could point anywhere on the host.
func EnsureMountPoints(rootfs string, mps []Mount) error {
	for _, m := range mps {
		if err := ensureMountPoint(rootfs, m.Dest, m.File); err != nil {
			return fmt.Errorf("sandbox: mount point %s in rootfs %s: %w", m.Dest, rootfs, err)
		}
	}
	return nil
}

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
			if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
				return err
			}
		default:
			if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			// Whatever the umask: runsc's gofer, as the agent's uid,
			// walks these.
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}
