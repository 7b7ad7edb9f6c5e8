// Command flock-agent is the runner of every flock agent. systemd starts it
// in the agent's unit; it applies what systemd cannot (the Landlock IPC
// scope, and the seccomp walls that hold at every level: agent.Walls) and
// then, by its arguments:
//
//	flock-agent                    connect to the bus, heartbeat, log; no tasks
//	flock-agent task -- ARGV...    the same, and run ARGV for each task
//	flock-agent exec -- ARGV...    exec ARGV, the agent's own program
//	flock-agent -- ARGV...         the same as exec
//	flock-agent --version          print the build (version, commit, date)
//	flock-agent --man              print the man page, flock-agent(1)
//	flock-agent sandbox FLAGS -- [ARGS]
//	                               (root) run flock-agent ARGS in the agent's
//	                               container (a contained level: sandbox.Launcher)
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/internal/version"
	"github.com/flockrun/flock/sandbox"
)

// scopedMark is set in the environment of the re-exec'd program so it
// knows the scope is already applied (a domain cannot be left anyway):
// "1" scoped, "0" the kernel has no scopes. Task commands inherit it.
const scopedMark = "FLOCK_IPC_SCOPED"

// errLogged is an error already written to the agent's log.
var errLogged = errors.New("logged")

func main() {
	args, err := agent.ParseUnitArgs(os.Args[1:])
	if err == nil {
		err = run(args)
	}
	if err != nil {
		if !errors.Is(err, errLogged) {
			fmt.Fprintln(os.Stderr, "flock-agent:", err)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	l, inner, err := sandbox.ReadUnitArgs(args)
	if err != nil {
		return err
	}
	if l.Level.Contained() {
		return launch(l, inner)
	}
	inv, err := parseArgs(inner)
	if err != nil {
		return err
	}
	switch inv.mode {
	case modeVersion:
		fmt.Println(version.Get("flock-agent"))
		return nil
	case modeMan:
		return writeMan(os.Stdout, version.Get("flock-agent"))
	}
	env, err := agent.FromEnv()
	if err != nil {
		return err
	}
	mark := os.Getenv(scopedMark)
	if mark != "" && inv.mode == modeProbe {
		return runProbes(inv.argv[0])
	}
	if mark != "" && inv.mode != modeExec {
		return program(env, inv, mark == "1")
	}
	path, argv, err := target(inv)
	if err != nil {
		return err
	}
	if mark != "" { // already in the domain, which exec keeps
		return execve(path, argv, os.Environ())
	}
	return agent.ConfineThenExec(path, argv, os.Environ(), agent.Walls{JIT: env.JIT}, scopedMark)
}

// target is what to exec in the scope: the command in exec mode, else
// flock-agent itself with the same arguments, by its own path so ps and
// systemctl status name it flock-agent.
func target(inv invocation) (path string, argv []string, err error) {
	if inv.mode == modeExec {
		if path, err = exec.LookPath(inv.argv[0]); err != nil {
			return "", nil, fmt.Errorf("command %q: %w", inv.argv[0], err)
		}
		return path, inv.argv, nil
	}
	path, err = os.Executable()
	return path, os.Args, err
}

// runProbes answers flockctl audit's batch on standard output, which
// the audit's unit writes to a file only root reads.
func runProbes(batch string) error {
	b, err := probe.Decode([]byte(batch), false)
	if err != nil {
		return err
	}
	b.Results = probe.RunAll(b.Requests, probe.Timeout)
	if _, err = os.Stdout.Write(append(b.Encode(), '\n')); err != nil || !b.Hold {
		return err
	}
	// A colluder: serve what it opened until its unit is stopped.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}

func execve(path string, argv, env []string) error {
	if err := syscall.Exec(path, argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// launch is the launcher of a contained level: the unit's agent, read as
// every mode reads it, handed to its container by the level's driver.
func launch(l sandbox.Launcher, inner []string) error {
	env, err := agent.FromEnv()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	inside := env
	inside.NKeyFile = sandbox.CredPath
	return sandbox.Launch(l, sandbox.Agent{ID: env.ID, Home: env.Home, LogFile: env.LogFile, SharedDir: env.SharedDir,
		Cred: env.NKeyFile, Environ: inside.Environ()}, inner)
}
