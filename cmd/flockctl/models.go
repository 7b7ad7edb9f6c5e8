package main

import (
	"os"
	"strings"

	"github.com/flockrun/flock/spec"
)

// rootFiles refuses a spec whose granted providers' key or CA files, or
// granted secrets' files, this host lacks or leaves readable by others,
// each problem with its field and its fix (as a spec's own problems
// are), before anything changes. file names the spec in the lines (""
// for --agents).
func rootFiles(f *spec.Flock, agents []spec.Agent, file string) error {
	check := spec.FileCheck{Stat: os.Stat, ReadFile: os.ReadFile}
	errs := append(f.ProviderFileProblems(check, agents), f.SecretFileProblems(check, agents)...)
	if len(errs) == 0 {
		return nil
	}
	if file == "" {
		return errs
	}
	return prefixed{file, errs}
}

// prefixed is errs with each line prefixed by the spec's file, as
// spec.Load reports the spec's own problems.
type prefixed struct {
	file string
	errs spec.Errors
}

func (p prefixed) Error() string {
	lines := strings.Split(p.errs.Error(), "\n")
	for i := range lines {
		lines[i] = p.file + ": " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func (p prefixed) Unwrap() error { return p.errs }
