package harness

// The root file system of the tests' podman and gVisor agents: busybox
// (Debian's busybox-static, no libc needed) and the probe, built into
// every machine at Rootfs. It has a world-writable /scratch so a test can
// show the root is read-only (EROFS), not merely root's.

import (
	"fmt"
	"os"
	"path/filepath"
)

// Rootfs is where every machine has the test root file system.
const Rootfs = "/var/lib/flock-test/rootfs"

// busybox is Debian's busybox-static.
const busybox = "/bin/busybox"

var busyboxApplets = []string{"sh", "cat", "echo", "id", "ls", "tr", "sleep", "uname", "dmesg", "touch", "mount", "grep", "read", "true", "yes"}

func buildRootfs(root string, bins map[string]string) error {
	if _, ok := bins["probe"]; !ok {
		return nil // NoBinaries: nothing runs in it
	}
	if fi, err := os.Stat(busybox); err != nil || fi.Size() < 1<<20 {
		return fmt.Errorf("the test rootfs needs busybox-static at %s (make deps installs it): %v", busybox, err)
	}
	r := filepath.Join(root, Rootfs)
	for _, d := range []string{"bin", "usr/local/bin", "etc", "proc", "dev", "sys", "tmp", "run", "scratch"} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(r, "scratch"), 0o1777); err != nil {
		return err
	}
	if err := CopyFile(busybox, filepath.Join(r, "bin/busybox"), 0o755); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(r, "bin", a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(r, "etc/passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	return CopyFile(bins["probe"], filepath.Join(r, "usr/local/bin/probe"), 0o755)
}
