package main

import (
	"errors"
	"fmt"

	"github.com/flockrun/flock/status"
)

// exitCode is what flockctl exits with: the contract scripts rely on
// (docs/operating.md, "Exit codes"), written here once.
type exitCode int

const (
	exitOK exitCode = 0
	// exitError: the verb failed (a bad flag or spec, an unknown agent,
	// an unreadable state or host, a change that did not apply, a
	// deprovision not confirmed); the error is on stderr.
	exitError exitCode = 1
	// exitPending: flockctl plan found changes to make, as terraform
	// plan -detailed-exitcode says it; deprovision --dry-run found
	// something to remove.
	exitPending exitCode = 2
	// exitUnhealthy: flockctl status printed an agent that is not well
	// (status.Agent.Problem) or drift of the whole flock.
	exitUnhealthy exitCode = 3
	// exitUnreachable: flockctl status could not read the flock: none is
	// provisioned, systemd does not answer, or the bus does not.
	exitUnreachable exitCode = 4
)

// Error lets a verb return a code: it exits with it and prints nothing
// more, having said what it has to on stdout.
func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// codedError is a failure that exits with a code other than exitError,
// printed as err says.
type codedError struct {
	code exitCode
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// unreachable is err, why the flock could not be read, exiting with
// exitUnreachable.
func unreachable(err error) error { return codedError{exitUnreachable, err} }

// exitFor is what flockctl exits with after a verb's err, and whether
// the error is to be printed.
func exitFor(err error) (code exitCode, say bool) {
	var ce codedError
	var c exitCode
	switch {
	case err == nil:
		return exitOK, false
	case errors.As(err, &ce):
		return ce.code, true
	case errors.As(err, &c):
		return c, false
	}
	return exitError, true
}

// statusExit is what flockctl status exits with after printing r: the
// bus not answering leaves every agent's connection unknown, so the flock
// could not be read; else any problem the rows show.
func statusExit(r status.Report) exitCode {
	switch {
	case r.BusErr != nil:
		return exitUnreachable
	case len(r.Problems()) > 0:
		return exitUnhealthy
	}
	return exitOK
}
