package harness

// The machines' and VMs' directories: claiming one, sweeping those left
// by crashed runs, and removing one with everything mounted in it.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	ownerFile  = "owner"      // procID of the process that made the dir
	nspawnFile = "nspawn.pid" // procID of the machine's nspawn, while it runs
	qemuFile   = "qemu.pid"   // procID of the VM's qemu, while it runs
)

// vmParentDir is not /tmp, for the same reason as parentDir.
const vmParentDir = "/var/tmp/flock-vm"

// dirKind is a parent of per-instance directories: each records its owner
// (the test process) and the process it runs, so that the next claim
// sweeps those a crashed run left.
type dirKind struct {
	what     string // "machine", "VM"
	parent   string
	procFile string // procID of the instance's nspawn or qemu
	comm     string // that process's command name
	// sweep, if set, removes what else a crashed run left outside its
	// dir, after the stale dirs are gone (under the same lock).
	sweep func(logf func(string, ...any))
}

var (
	// machineDirs also holds the fresh machine's and the build's dirs.
	machineDirs = dirKind{"machine", parentDir, nspawnFile, "systemd-nspawn", sweepNetns}
	// netDirs: a private network's (net.go), beside the machines' so
	// either sweep removes a dead one; it has no process of its own.
	netDirs = dirKind{"network", parentDir, nspawnFile, "systemd-nspawn", sweepNetns}
	// vmDirs: a VM's qcow2 overlay, console log, known_hosts and ssh
	// control socket.
	vmDirs = dirKind{"VM", vmParentDir, qemuFile, "qemu-system-x86", nil}
)

// claim creates dir and records this process as its owner, first
// sweeping stale dirs. Both run under a lock on the parent so concurrent
// test binaries neither sweep a dir being made nor race each other's
// sweeps.
func (k dirKind) claim(dir string, logf func(string, ...any)) error {
	if err := os.MkdirAll(k.parent, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(k.parent, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	k.sweepStale(logf)
	if k.sweep != nil {
		k.sweep(logf)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("%s dir: %w (a live %s of that name?)", k.what, err, k.what)
	}
	self, err := procOf(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(self.String()+"\n"), 0o644)
}

// sweepStale removes the dirs whose owner process is gone and whose
// process is gone too (or the recorded PID is another program now). One
// still running without its owner is left alone: it was started with a
// parent-death signal and is on its way down, and its files must stay
// until it is.
func (k dirKind) sweepStale(logf func(string, ...any)) {
	ents, err := os.ReadDir(k.parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(k.parent, e.Name())
		if stale, why := k.isStale(dir); stale {
			err := removeDir(dir)
			logf("harness: removed stale %s (%s): %v", dir, why, err)
		}
	}
}

func (k dirKind) isStale(dir string) (bool, string) {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		// Dirs are made with their owner file under the lock, so this is
		// a crash between the two; give a clock skew some slack anyway.
		if fi, serr := os.Stat(dir); serr == nil && time.Since(fi.ModTime()) > time.Minute {
			return true, "no owner recorded"
		}
		return false, ""
	}
	owner, err := parseProcID(string(b))
	if err != nil {
		return true, err.Error()
	}
	if owner.alive() {
		return false, ""
	}
	if b, err := os.ReadFile(filepath.Join(dir, k.procFile)); err == nil {
		if p, err := parseProcID(string(b)); err == nil && p.alive() && comm(p.pid) == k.comm {
			return false, ""
		}
	}
	return true, fmt.Sprintf("owner pid %d gone, no %s running", owner.pid, k.comm)
}

// removeDir unmounts everything mounted at or below dir, deepest first,
// and removes dir. It never removes through a mount it failed to detach.
func removeDir(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, mp := range mounts {
		if err := unmount(mp); err != nil {
			errs = append(errs, err)
		}
	}
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		return errors.Join(append(errs, fmt.Errorf("still mounted under %s: %v (%v); not removing it", dir, left, err))...)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unmount retries a busy mount for a few seconds (a process that just
// died may still pin it), then detaches it lazily as the last resort.
func unmount(mp string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Unmount(mp, unix.UMOUNT_NOFOLLOW)
		if err == nil || errors.Is(err, unix.EINVAL) { // EINVAL: not mounted (any more)
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			if lerr := unix.Unmount(mp, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); lerr != nil {
				return fmt.Errorf("umount %s: %w; lazy umount: %w", mp, err, lerr)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountsUnder lists the mount points at or below dir in our mount
// namespace, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of
// mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
