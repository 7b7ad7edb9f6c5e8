package harness

// The machines' directories: claiming one, sweeping those left by crashed
// runs, and removing one with everything mounted in it.

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
)

// claimDir creates dir for a new machine and records this process as its
// owner, first sweeping stale dirs. Both run under a lock on the parent
// so concurrent test binaries neither sweep a dir being made nor race
// each other's sweeps.
func claimDir(dir string, logf func(string, ...any)) error {
	if err := os.MkdirAll(parentDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockParent()
	if err != nil {
		return err
	}
	defer unlock()
	sweepStale(logf)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("machine dir: %w (a live machine of that name?)", err)
	}
	self, err := procOf(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(self.String()+"\n"), 0o644)
}

func lockParent() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(parentDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil // closing drops the lock
}

// sweepStale removes the dirs of machines whose owner process is gone and
// whose nspawn is gone too (or the recorded PID is no nspawn now). An
// nspawn still running without its owner is left alone: it was started
// with a parent-death signal and is on its way down.
func sweepStale(logf func(string, ...any)) {
	ents, err := os.ReadDir(parentDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(parentDir, e.Name())
		if stale, why := isStale(dir); stale {
			err := removeDir(dir)
			logf("harness: removed stale %s (%s): %v", dir, why, err)
		}
	}
}

func isStale(dir string) (bool, string) {
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
	if b, err := os.ReadFile(filepath.Join(dir, nspawnFile)); err == nil {
		if ns, err := parseProcID(string(b)); err == nil && ns.alive() && comm(ns.pid) == "systemd-nspawn" {
			return false, ""
		}
	}
	return true, fmt.Sprintf("owner pid %d gone, no nspawn running", owner.pid)
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
