package units

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// InstallDirs are where flock's programs are installed, in PATH's order:
// `make install` and the Ansible role's binaries (/usr/local/bin), and the
// Debian package (/usr/bin).
var InstallDirs = []string{"/usr/local/bin", "/usr/bin"}

// Programs are the installed flockctl and flock-agent that flock.service
// and every agent's unit run.
type Programs struct {
	Flockctl, Agent string
}

// FindPrograms picks the install the units run: the directory of self (the
// running flockctl) when it is one of dirs and holds both programs, so the
// package's /usr/bin/flockctl provisions units that run /usr/bin's;
// otherwise (a flockctl run from a checkout's bin/, or go run) the first of
// dirs that holds both. A unit never runs a program from a home directory,
// which the bus's ProtectHome would hide from it.
func FindPrograms(self string, dirs []string) (Programs, error) {
	in := func(dir string) (Programs, bool) {
		p := Programs{Flockctl: filepath.Join(dir, "flockctl"), Agent: filepath.Join(dir, "flock-agent")}
		return p, executable(p.Flockctl) && executable(p.Agent)
	}
	if self != "" && slices.Contains(dirs, filepath.Dir(self)) {
		if p, ok := in(filepath.Dir(self)); ok {
			return p, nil
		}
	}
	for _, d := range dirs {
		if p, ok := in(d); ok {
			return p, nil
		}
	}
	return Programs{}, fmt.Errorf("flockctl and flock-agent are not both installed in %s, and flock.service and every agent's unit run them from there: install the flock package (make deb; apt-get install ./bin/flock_*.deb) or run make install",
		strings.Join(dirs, " or "))
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
