package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Runtimes are where each level's runtime is on a host, by level.
type Runtimes map[Level]string

// Path is level l's runtime on this host: as found, else its default.
func (r Runtimes) Path(l Level) string {
	if p := r[l]; p != "" {
		return p
	}
	return l.Profile().Runtime.Default
}

// HostRuntimes finds every registered level's runtime: on PATH, or else
// where it is expected (Ready says when it is not there).
func HostRuntimes() Runtimes {
	r := Runtimes{}
	for _, d := range drivers {
		rt := d.Profile().Runtime
		if rt.Name == "" {
			continue
		}
		r[d.Level()] = rt.Default
		if p, err := exec.LookPath(rt.Name); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				r[d.Level()] = abs
			}
		}
	}
	return r
}

// Ready says why an agent at level l with root file system rootfs cannot
// run on this host: its runtime is not installed or its rootfs is not a
// directory here. A level without a runtime is always ready.
func (r Runtimes) Ready(l Level, rootfs string) error {
	d, ok := Lookup(l)
	if !ok {
		return fmt.Errorf("level %q is not known; choose %s", l, Or(Levels()))
	}
	rt := d.Profile().Runtime
	if rt.Name == "" {
		return nil
	}
	bin := r.Path(l)
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("level %s needs %s, which is not installed: %s", l, bin, rt.Install)
	}
	if rootfs != "" {
		if fi, err := os.Stat(rootfs); err != nil || !fi.IsDir() {
			return fmt.Errorf("rootfs %s is not a directory on this host; give the directory holding its root file system", rootfs)
		}
	}
	return nil
}
