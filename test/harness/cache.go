package harness

// Built once, read ever after: the VM image and the fresh-machine tree
// are each built into <cache>/<recipe hash>/ and never written after
// that. A build happens in a temporary dir under a lock and is renamed
// into place when complete, so a crashed build is never used and two test
// processes never build at once.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cachedBuild returns cacheDir/key, building it first with build (into a
// temporary dir that becomes the entry when build returns nil) if the
// cache has none. what names the entry in log lines.
func cachedBuild(cacheDir, key, what string, build func(dir string) error, logf func(string, ...any)) (string, error) {
	t0 := time.Now()
	dir := filepath.Join(cacheDir, key)
	if _, err := os.Stat(dir); err == nil {
		markUsed(dir)
		logf("%s: reused %s in %v", what, dir, time.Since(t0).Round(time.Millisecond))
		return dir, nil
	}
	// 0700: the VM cache holds the private key that is root in every VM.
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cacheDir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(dir); err == nil { // built while we waited
		logf("%s: reused %s (built by another process) in %v", what, dir, time.Since(t0).Round(time.Millisecond))
		return dir, nil
	}
	sweepBuilds(cacheDir, logf)
	pruneUnused(cacheDir, logf)
	tmp := filepath.Join(cacheDir, fmt.Sprintf(".build-%d", os.Getpid()))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", err
	}
	if err := build(tmp); err != nil {
		if rerr := removeDir(tmp); rerr != nil {
			err = fmt.Errorf("%w; removing %s: %w", err, tmp, rerr)
		}
		return "", fmt.Errorf("build the %s: %w", what, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "recipe"), []byte(key+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	logf("%s: built %s in %v (cold)", what, dir, time.Since(t0).Round(time.Second))
	return dir, nil
}

// sweepBuilds removes builds a crashed process left. Only called under
// the lock, so none of them is in progress.
func sweepBuilds(cacheDir string, logf func(string, ...any)) {
	stale, _ := filepath.Glob(filepath.Join(cacheDir, ".build-*"))
	for _, d := range stale {
		err := removeDir(d) // unmounts first; never reaches through a mount
		logf("cache: removed a crashed build %s: %v", d, err)
	}
}

// unusedFor is how long an entry of another recipe (an older checkout's)
// is kept after its last use.
const unusedFor = 7 * 24 * time.Hour

// markUsed records a use in the entry's mtime, for pruneUnused.
func markUsed(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// pruneUnused removes the entries no test has used for unusedFor (a VM
// image is about 450 MB). Called under the lock; a VM still running on
// one keeps its open disk.
func pruneUnused(cacheDir string, logf func(string, ...any)) {
	ents, _ := os.ReadDir(cacheDir)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !e.IsDir() || strings.HasPrefix(e.Name(), ".") || time.Since(fi.ModTime()) < unusedFor {
			continue
		}
		d := filepath.Join(cacheDir, e.Name())
		logf("cache: removed %s, unused since %s: %v", d, fi.ModTime().Format(time.DateOnly), removeDir(d))
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
