// Command flock-agent is the runner of every flock agent. systemd starts it
// in the agent's unit; it applies what systemd cannot (the Landlock IPC
// scope), then either execs the spec's command (flock-agent -- ARGV...) or,
// with no command, becomes the default agent program itself.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/flockrun/flock/agent"
)

// scopedMark is set in the environment of the re-exec'd default program so
// it knows the scope is already applied (a domain cannot be left anyway).
const scopedMark = "FLOCK_IPC_SCOPED"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "flock-agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	argv, err := commandArgs(args)
	if err != nil {
		return err
	}
	env, err := agent.FromEnv()
	if err != nil {
		return err
	}
	if os.Getenv(scopedMark) != "" {
		return defaultProgram(env, os.Getenv(scopedMark) == "1")
	}
	// No command: the default program, re-exec'd scoped (by its own path,
	// so ps and systemctl status name it flock-agent).
	path, err := os.Executable()
	if err != nil {
		return err
	}
	if len(argv) > 0 {
		if path, err = exec.LookPath(argv[0]); err != nil {
			return fmt.Errorf("command %q: %w", argv[0], err)
		}
	} else {
		argv = []string{os.Args[0]}
	}
	err = agent.ScopeIPCThenExec(path, argv, append(os.Environ(), scopedMark+"=1"))
	if !errors.Is(err, agent.ErrNoScopes) {
		return err
	}
	fmt.Fprintln(os.Stderr, "flock-agent:", err)
	if err := syscall.Exec(path, argv, append(os.Environ(), scopedMark+"=0")); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// commandArgs accepts nothing or "-- ARGV...".
func commandArgs(args []string) ([]string, error) {
	switch {
	case len(args) == 0:
		return nil, nil
	case args[0] == "--" && len(args) > 1:
		return args[1:], nil
	}
	return nil, fmt.Errorf("usage: flock-agent [-- COMMAND ARGS...] (got %q)", args)
}

// defaultProgram logs that it is up and stays up until systemd stops it.
func defaultProgram(env agent.Env, scoped bool) error {
	log, closeLog, err := agent.NewLogger(env, os.Stdout)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	log.Info("agent started", "pid", os.Getpid(), "uid", os.Getuid(), "nats_url", env.NATSURL,
		"shared_dir", env.SharedDir, "ipc_scoped", scoped)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("agent stopping", "uptime_s", int(time.Since(start).Seconds()))
			return nil
		case <-tick.C:
			log.Info("alive", "uptime_s", int(time.Since(start).Seconds()))
		}
	}
}
