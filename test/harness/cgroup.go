package harness

// Each machine gets cgroups of its own. nspawn runs with --keep-unit (no
// host systemd to make a scope), so without this every machine's systemd
// takes the caller's cgroup as its root: two machines booted at once then
// share one tree, see each other's unit cgroups (flock-agent@1.service in
// both) and never collect their transient units.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupRoots are the hierarchies a machine's systemd uses: the unified
// one and, on a hybrid host, the named systemd one.
var cgroupRoots = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup"}

// machineCgroups are the directories the machine's nspawn is moved into:
// one per hierarchy mounted here.
func machineCgroups(name string) []string {
	var dirs []string
	for _, root := range cgroupRoots {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		dirs = append(dirs, filepath.Join(root, "flock-harness", name))
	}
	return dirs
}

// inCgroups wraps argv in a shell that moves itself into dirs and then
// execs argv, so nspawn and everything it forks start there (the PID
// stays the same across exec).
func inCgroups(dirs, argv []string) []string {
	const script = `for d in $FLOCK_HARNESS_CGROUPS; do mkdir -p "$d" && echo $$ > "$d/cgroup.procs" || exit 1; done; exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "sh"}, argv...)
}

func cgroupEnv(dirs []string) string {
	return "FLOCK_HARNESS_CGROUPS=" + strings.Join(dirs, " ")
}

// removeCgroups removes the machine's cgroups once it has stopped, the
// deepest first (a cgroup with children cannot be removed).
func removeCgroups(dirs []string) error {
	var errs []error
	for _, top := range dirs {
		var all []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
		for _, p := range all {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
