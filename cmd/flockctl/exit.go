package main

import (
	"errors"
	"fmt"
)

// exitCode is what flockctl exits with: the contract scripts rely on
// (docs/operating.md, "Exit codes"), written here once.
type exitCode int

const (
	exitOK exitCode = 0
	// exitError: the verb failed (a bad spec, an unreadable state or
	// host, a change that did not apply); the error is on stderr.
	exitError exitCode = 1
	// exitPending: flockctl plan found changes to make, as terraform
	// plan -detailed-exitcode says it.
	exitPending exitCode = 2
)

// Error lets a verb return a code: it exits with it and prints nothing
// more, having said what it has to on stdout.
func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exitFor is what flockctl exits with after a verb's err, and whether
// the error is to be printed.
func exitFor(err error) (code exitCode, say bool) {
	var c exitCode
	switch {
	case err == nil:
		return exitOK, false
	case errors.As(err, &c):
		return c, false
	}
	return exitError, true
}
