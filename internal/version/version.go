// Package version is what `flockctl version` and `flock-agent --version`
// print: the version, commit and build date the Makefile stamps in with
// -ldflags -X, or, in a plain `go build` or `go run`, what the Go
// toolchain recorded of the checkout (vcs.revision, vcs.time).
package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the Makefile (LDFLAGS): -X github.com/flockrun/flock/internal/version.Version=...
// Version is a Debian version (it starts with a digit): the package's
// version and the program's are the same string.
var (
	Version string
	Commit  string
	Date    string // RFC 3339, UTC
)

// Info is one program's build.
type Info struct {
	Program string `json:"program"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

// unknown stands for what neither the Makefile nor the toolchain recorded.
const unknown = "unknown"

// Get is program's build: the stamped values, else the toolchain's.
func Get(program string) Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(program, Version, Commit, Date, bi)
}

// resolve fills what was not stamped from the build info (nil: none).
// A build without ldflags calls itself "devel": it is no release.
func resolve(program, ver, commit, date string, bi *debug.BuildInfo) Info {
	in := Info{Program: program, Version: ver, Commit: commit, Date: date, Go: runtime.Version()}
	if bi != nil {
		in.Go = bi.GoVersion
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if in.Commit == "" {
			in.Commit = settings["vcs.revision"]
			if in.Commit != "" && settings["vcs.modified"] == "true" {
				in.Commit += "-dirty"
			}
		}
		if in.Date == "" {
			in.Date = settings["vcs.time"]
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	if in.Commit == "" {
		in.Commit = unknown
	}
	if in.Date == "" {
		in.Date = unknown
	}
	return in
}

// String is the one line `flockctl version` prints.
func (in Info) String() string {
	return fmt.Sprintf("%s %s (commit %s, built %s, %s)", in.Program, in.Version, in.Commit, in.Date, in.Go)
}

// JSON is Info as one line of JSON (--output json).
func (in Info) JSON() []byte {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err) // five strings cannot fail to marshal
	}
	return append(b, '\n')
}
