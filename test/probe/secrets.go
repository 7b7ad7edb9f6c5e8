package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/flockrun/flock/test/standin"
)

// secretsServe runs the stand-ins of the APIs an agent's secrets are for
// (standin.Secrets) over TLS, with a certificate for *.flock.test signed
// by the test CA in CA_DIR (testCA: the test puts ca.pem among the
// machine's roots, as a public CA's would be), serving the bare
// repositories under GIT_ROOT with git http-backend. The secrets are
// read from GITHUB_FILE and REST_FILE at its start (a secret on a
// command line would be in every process's sight).
func secretsServe(args []string) error {
	if len(args) != 5 {
		return errors.New("usage: probe secrets-serve ADDR CA_DIR GIT_ROOT GITHUB_FILE REST_FILE")
	}
	s := &standin.Secrets{GitRoot: args[2]}
	for i, v := range []*string{&s.GitHub, &s.REST} {
		b, err := os.ReadFile(args[3+i])
		if err != nil {
			return err
		}
		*v = strings.TrimSpace(string(b))
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("git --exec-path: %w", err)
	}
	s.Backend = filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	cert, err := caLeaf(args[1], "flock.test", "*.flock.test")
	if err != nil {
		return err
	}
	return serveTLS(args[0], cert, s)
}
