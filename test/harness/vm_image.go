package harness

// The cached VM image: built once per recipe into
// /var/cache/flock-vm/<recipe hash>/ and only ever read after that. A build
// happens in a temporary dir under a lock and is renamed into place when
// complete, so a crashed build is never used and two test processes never
// build at once.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	t0 := time.Now()
	img := imageAt(filepath.Join(vmCacheDir, recipeHash()))
	if _, err := os.Stat(img.dir); err == nil {
		markUsed(img.dir)
		logf("vm image: reused %s in %v", img.dir, time.Since(t0).Round(time.Millisecond))
		return img, nil
	}
	// 0700: the cache holds the private key that is root in every VM.
	if err := os.MkdirAll(vmCacheDir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(vmCacheDir, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Stat(img.dir); err == nil { // built while we waited
		logf("vm image: reused %s (built by another process) in %v", img.dir, time.Since(t0).Round(time.Millisecond))
		return img, nil
	}
	sweepBuilds(logf)
	pruneImages(logf)
	tmp := filepath.Join(vmCacheDir, fmt.Sprintf(".build-%d", os.Getpid()))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	if err := buildImage(tmp, logf); err != nil {
		if rerr := removeDir(tmp); rerr != nil {
			err = fmt.Errorf("%w; removing %s: %w", err, tmp, rerr)
		}
		return nil, fmt.Errorf("build the VM image: %w", err)
	}
	if err := os.Rename(tmp, img.dir); err != nil {
		return nil, err
	}
	logf("vm image: built %s in %v (cold)", img.dir, time.Since(t0).Round(time.Second))
	return img, nil
}

// sweepBuilds removes builds a crashed process left. Only called under
// the lock, so none of them is in progress.
func sweepBuilds(logf func(string, ...any)) {
	stale, _ := filepath.Glob(filepath.Join(vmCacheDir, ".build-*"))
	for _, d := range stale {
		err := removeDir(d) // unmounts first; never reaches through a mount
		logf("vm image: removed a crashed build %s: %v", d, err)
	}
}

// unusedFor is how long an image of another recipe (an older checkout's)
// is kept after its last use.
const unusedFor = 7 * 24 * time.Hour

// markUsed records a use in the entry's mtime, for pruneImages.
func markUsed(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// pruneImages removes the images no test has used for unusedFor, each
// about 450 MB. Called under the lock; a VM still running on one keeps
// its open disk.
func pruneImages(logf func(string, ...any)) {
	ents, _ := os.ReadDir(vmCacheDir)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !e.IsDir() || strings.HasPrefix(e.Name(), ".") || time.Since(fi.ModTime()) < unusedFor {
			continue
		}
		d := filepath.Join(vmCacheDir, e.Name())
		logf("vm image: removed %s, unused since %s: %v", d, fi.ModTime().Format(time.DateOnly), os.RemoveAll(d))
	}
}

// lockFile takes an exclusive flock on path, waiting for it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// buildImage makes a complete cache entry in dir.
func buildImage(dir string, logf func(string, ...any)) error {
	mirror, err := debianMirror()
	if err != nil {
		return err
	}
	img := imageAt(dir)
	tree := filepath.Join(dir, "tree")
	logPath := filepath.Join(dir, "build.log")

	t := time.Now()
	logf("vm image: debootstrap %s from %s and %d packages into %s (a few minutes, once per recipe)", vmSuite, mirror, len(vmPackages), tree)
	// Its own PID namespace too, whose init dies with unshare (--kill-child)
	// and unshare with us: nothing of a build outlives the test process.
	argv := append([]string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
		"--", "bash", "-c", chrootScript, "bash", tree, mirror}, vmPackages...)
	if err := runLogged(logPath, "unshare", argv...); err != nil {
		return err
	}
	logf("vm image: tree ready in %v", time.Since(t).Round(time.Second))

	if err := runLogged(logPath, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flock-vm", "-f", img.Key); err != nil {
		return err
	}
	if err := configureTree(tree, img); err != nil {
		return err
	}
	if err := takeBoot(tree, img); err != nil {
		return err
	}

	t = time.Now()
	if err := runLogged(logPath, "truncate", "-s", vmImageSize, img.Base); err != nil {
		return err
	}
	if err := runLogged(logPath, "mkfs.ext4", "-q", "-F", "-L", "flock-root", "-d", tree, img.Base); err != nil {
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
	return os.WriteFile(filepath.Join(dir, "recipe"), []byte(recipeHash()+"\n"), 0o644)
}

// configureTree writes the recipe's files, masks units and lets the
// cache's key in as root.
func configureTree(tree string, img *vmImage) error {
	for p, content := range vmFiles {
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

// takeBoot copies the kernel, the initrd and the ssh host key out of the
// tree: qemu boots the kernel directly, and ssh checks the host key.
func takeBoot(tree string, img *vmImage) error {
	for dst, pat := range map[string]string{img.Kernel: "boot/vmlinuz-*", img.Initrd: "boot/initrd.img-*"} {
		m, _ := filepath.Glob(filepath.Join(tree, pat))
		if len(m) != 1 {
			return fmt.Errorf("want one %s in the tree, found %v", pat, m)
		}
		if err := copyFile(m[0], dst, 0o644); err != nil {
			return err
		}
	}
	return copyFile(filepath.Join(tree, "etc/ssh/ssh_host_ed25519_key.pub"), img.HostKey, 0o644)
}

// runLogged runs a build step with its output appended to logPath; its
// error carries the log's tail.
func runLogged(logPath, name string, args ...string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "==== %s %s\n", name, strings.Join(args, " "))
	cmd := newCmd(name, args...)
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
