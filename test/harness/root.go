package harness

// The machine's root: an overlay whose lower dir is the host's /, so the
// machine has the host's packages and writes nothing to the host.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

func mountRoot(dir string) error {
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", dir, dir)
	if err := unix.Mount("overlay", filepath.Join(dir, "root"), "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount -t overlay -o %s %s/root: %w", opts, dir, err)
	}
	return nil
}

// prepareRoot makes the merged root a machine of its own before it boots.
// Everything is written into the merged root here, before nspawn starts:
// a file changed on the host's / after the overlay is mounted may not show
// inside (docs/design.md, "Test tiers"), and nothing here may touch the host.
func prepareRoot(root, name string, bins map[string]string) error {
	// journald refuses to link journals of a machine with the host's id,
	// and a booted systemd expects an id of its own.
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(root, "etc/machine-id"), []byte(hex.EncodeToString(id)+"\n"), 0o444); err != nil {
		return err
	}
	// Else systemd sets the host's hostname from /etc/hostname, over
	// the machine name nspawn gave it.
	if err := replaceFile(filepath.Join(root, "etc/hostname"), []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	if err := maskUnits(root); err != nil {
		return err
	}
	// podman's overlay driver cannot put its upper layer on the machine's
	// overlayfs root; vfs can (levels podman and gvisor use --rootfs, so
	// no image is copied).
	if err := os.MkdirAll(filepath.Join(root, "etc/containers"), 0o755); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(root, "etc/containers/storage.conf"), []byte(podmanStorage), 0o644); err != nil {
		return err
	}
	if err := installBinaries(root, bins); err != nil {
		return err
	}
	return buildRootfs(root, bins)
}

const podmanStorage = `# flock test machine: no overlay on an overlayfs root
[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
`

// alwaysMasked are units a test machine never wants, enabled or not:
// consoles (nspawn's console is read-only), network daemons (the
// machine's network is lo only), and periodic maintenance.
var alwaysMasked = []string{
	"getty@tty1.service", "console-getty.service",
	"systemd-networkd.service", "systemd-networkd.socket", "systemd-networkd-wait-online.service",
	"systemd-resolved.service", "systemd-timesyncd.service",
	"ssh.service", "ssh.socket", "cron.service",
	"apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer",
	"e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "dpkg-db-backup.timer",
	// NFS (vagrant's dependencies bring it): a target keep() would keep,
	// pulling a mount that cannot work in a container.
	"nfs-client.target", "rpcbind.socket", "rpcbind.service", "run-rpc_pipefs.mount", "rpc_pipefs.target",
}

// keep says whether a unit the host enabled is one a booted machine needs
// to run transient units: targets, D-Bus, journald, sysusers, tmpfiles.
func keep(unit string) bool {
	if strings.HasSuffix(unit, ".target") {
		return true
	}
	for _, p := range []string{"dbus.", "systemd-journald", "systemd-sysusers", "systemd-tmpfiles", "systemd-logind"} {
		if strings.HasPrefix(unit, p) {
			return true
		}
	}
	return false
}

// maskUnits masks whatever the host enabled (postgresql, ...) and the
// units above, in the machine's /etc only.
func maskUnits(root string) error {
	etc := filepath.Join(root, "etc/systemd/system")
	set := map[string]bool{}
	for _, u := range alwaysMasked {
		set[u] = true
	}
	wants, _ := filepath.Glob(filepath.Join(etc, "*.wants", "*"))
	for _, w := range wants {
		if u := filepath.Base(w); !keep(u) {
			set[u] = true
		}
	}
	units := make([]string, 0, len(set))
	for u := range set {
		units = append(units, u)
	}
	sort.Strings(units)
	for _, u := range units {
		p := filepath.Join(etc, u)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("mask %s: %w", u, err)
		}
		if err := os.Symlink("/dev/null", p); err != nil {
			return fmt.Errorf("mask %s: %w", u, err)
		}
	}
	return nil
}

func installBinaries(root string, bins map[string]string) error {
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.Contains(n, "/") {
			return fmt.Errorf("binary name %q: want a file name in /usr/local/bin", n)
		}
		if err := CopyFile(bins[n], filepath.Join(root, "usr/local/bin", n), 0o755); err != nil {
			return fmt.Errorf("install %s: %w", n, err)
		}
	}
	return nil
}

// replaceFile writes a new file at p in place of whatever is there (a
// symlink to the host's file included).
func replaceFile(p string, data []byte, mode os.FileMode) error {
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// CopyFile copies src to dst with mode, making dst's directory; whatever
// was at dst is replaced, never written through (a symlink, a binary
// that runs).
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}
