package main

import "fmt"

// mode is what flock-agent was asked to be.
type mode string

const (
	modeDefault mode = "default" // connect, heartbeat, log; no tasks
	modeTask    mode = "task"    // the same, and each task runs argv
	modeExec    mode = "exec"    // become argv, the agent's own program
	// modeProbe runs flockctl audit's batch of hostile operations
	// (argv[0], probe.Batch) as the agent, inside its walls, and prints
	// the answered batch. Not in the usage: only the audit starts it.
	modeProbe mode = "probe"
	// modeVersion prints the build (internal/version) and exits.
	modeVersion mode = "--version"
	// modeMan prints the man page (man.go) and exits. Not in the usage:
	// make deb runs it, as it runs flockctl's hidden man.
	modeMan mode = "--man"
)

const usage = "usage: flock-agent [task -- COMMAND ARGS... | exec -- COMMAND ARGS... | --version]"

// invocation is a parsed command line.
type invocation struct {
	mode mode
	argv []string // the command of task and exec modes
}

// parseArgs reads flock-agent's arguments (without its name). A bare
// "-- ARGV" is exec, as flock-agent had it before task mode existed.
func parseArgs(args []string) (invocation, error) {
	switch {
	case len(args) == 0:
		return invocation{mode: modeDefault}, nil
	case (args[0] == string(modeVersion) || args[0] == string(modeMan)) && len(args) == 1:
		return invocation{mode: mode(args[0])}, nil
	case args[0] == "--" && len(args) > 1:
		return invocation{mode: modeExec, argv: args[1:]}, nil
	case args[0] == string(modeProbe) && len(args) == 2:
		return invocation{mode: modeProbe, argv: args[1:]}, nil
	case (args[0] == string(modeTask) || args[0] == string(modeExec)) && len(args) > 2 && args[1] == "--":
		return invocation{mode: mode(args[0]), argv: args[2:]}, nil
	}
	return invocation{}, fmt.Errorf("%s (got %q)", usage, args)
}
