package harness

// The cached VM image: built once per recipe into
// /var/cache/flock-vm/<recipe hash>/ (cache.go) and only ever read after
// that.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// vmCacheDir is outside the repository and survives reboots of the host.
const vmCacheDir = "/var/cache/flock-vm"

// vmImage is one complete cache entry.
type vmImage struct {
	dir     string
	Base    string // raw ext4 root file system; never written after the build
	Kernel  string
	Initrd  string
	Key     string // root's ssh key into every VM of this image
	HostKey string // the guest's ssh host key (public), for known_hosts
}

func imageAt(dir string) *vmImage {
	return &vmImage{
		dir:     dir,
		Base:    filepath.Join(dir, "base.img"),
		Kernel:  filepath.Join(dir, "vmlinuz"),
		Initrd:  filepath.Join(dir, "initrd.img"),
		Key:     filepath.Join(dir, "id_ed25519"),
		HostKey: filepath.Join(dir, "ssh_host_ed25519_key.pub"),
	}
}

// cachedImage returns the image of the current recipe, building it first
// if the cache has none.
func cachedImage(logf func(string, ...any)) (*vmImage, error) {
	dir, err := cachedBuild(vmCacheDir, recipeHash(), "vm image", func(dir string) error { return buildImage(dir, logf) }, logf)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mirror")); err == nil {
		logf("vm image: built from the Debian mirror %s", strings.TrimSpace(string(b)))
	}
	return imageAt(dir), nil
}

// buildImage makes a complete cache entry in dir.
func buildImage(dir string, logf func(string, ...any)) error {
	apt, err := hostAptConfig()
	if err != nil {
		return err
	}
	img := imageAt(dir)
	tree := filepath.Join(dir, "tree")
	logPath := filepath.Join(dir, "build.log")

	t := time.Now()
	logf("vm image: debootstrap %s from %s and %d packages into %s (a few minutes, once per recipe)", vmSuite, apt, len(vmPackages), tree)
	aptConf := filepath.Join(dir, "apt.conf")
	if err := os.WriteFile(aptConf, []byte(apt.Conf), 0o644); err != nil {
		return err
	}
	// Its own PID namespace too, whose init dies with unshare (--kill-child)
	// and unshare with us: nothing of a build outlives the test process.
	argv := append([]string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
		"--", "bash", "-c", chrootScript, "bash", tree, apt.Mirror, aptConf}, vmPackages...)
	if err := runLogged(logPath, apt.Env, "unshare", argv...); err != nil {
		return err
	}
	logf("vm image: tree ready in %v", time.Since(t).Round(time.Second))

	if err := runLogged(logPath, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flock-vm", "-f", img.Key); err != nil {
		return err
	}
	if err := configureTree(tree, img); err != nil {
		return err
	}
	if err := takeBoot(tree, img); err != nil {
		return err
	}

	t = time.Now()
	if err := runLogged(logPath, nil, "truncate", "-s", vmImageSize, img.Base); err != nil {
		return err
	}
	if err := runLogged(logPath, nil, "mkfs.ext4", "-q", "-F", "-L", "flock-root", "-d", tree, img.Base); err != nil {
		return err
	}
	// Read-only: qemu opens a backing file read-only anyway; this keeps
	// anything else from writing to it by mistake.
	if err := os.Chmod(img.Base, 0o444); err != nil {
		return err
	}
	logf("vm image: mkfs.ext4 -d in %v", time.Since(t).Round(time.Second))
	if err := os.RemoveAll(tree); err != nil { // no mounts: they died with unshare
		return err
	}
	return os.WriteFile(filepath.Join(dir, "mirror"), []byte(apt.String()+"\n"), 0o644)
}

// configureTree writes the recipe's files, masks units and lets the
// cache's key in as root.
func configureTree(tree string, img *vmImage) error {
	for p, content := range vmFiles {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, p)), 0o755); err != nil {
			return err
		}
		if err := replaceFile(filepath.Join(tree, p), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s in the image: %w", p, err)
		}
	}
	for _, u := range vmMasked {
		p := filepath.Join(tree, "etc/systemd/system", u)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Symlink("/dev/null", p); err != nil {
			return fmt.Errorf("mask %s in the image: %w", u, err)
		}
	}
	pub, err := os.ReadFile(img.Key + ".pub")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tree, "root/.ssh"), 0o700); err != nil {
		return err
	}
	return replaceFile(filepath.Join(tree, "root/.ssh/authorized_keys"), pub, 0o600)
}

// takeBoot copies the kernel, the VM's own initramfs (chrootScript) and
// the ssh host key out of the tree: qemu boots the kernel directly, with
// no bootloader, and ssh checks the host key.
func takeBoot(tree string, img *vmImage) error {
	for dst, pat := range map[string]string{img.Kernel: "boot/vmlinuz-*", img.Initrd: "boot/flock-initrd.img"} {
		m, _ := filepath.Glob(filepath.Join(tree, pat))
		if len(m) != 1 {
			return fmt.Errorf("want one %s in the tree, found %v", pat, m)
		}
		if err := CopyFile(m[0], dst, 0o644); err != nil {
			return err
		}
	}
	return CopyFile(filepath.Join(tree, "etc/ssh/ssh_host_ed25519_key.pub"), img.HostKey, 0o644)
}

// runLogged runs a build step, with env added to its environment and its
// output appended to logPath; its error carries the log's tail.
func runLogged(logPath string, env []string, name string, args ...string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "==== %s %s\n", name, strings.Join(args, " "))
	cmd := newCmd(name, args...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The parent-death signal follows the forking thread: keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s %s: %w; %s ends:\n%s", name, shortArgs(args), err, logPath, tail(string(b), 3000))
	}
	return nil
}

// shortArgs keeps an error readable when an argument is a whole script.
func shortArgs(args []string) string {
	s := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, "\n") {
			a = "'<script>'"
		}
		s[i] = a
	}
	return strings.Join(s, " ")
}
