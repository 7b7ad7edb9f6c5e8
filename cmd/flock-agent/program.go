package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/wire"
)

// program is flock-agent's own agent (default and task modes): on the
// bus, alive until systemd stops it, then a clean exit 0.
func program(env agent.Env, inv invocation, scoped bool) error {
	log, closeLog, err := agent.NewLogger(env, os.Stdout)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // a second SIGTERM ends flock-agent at once
	if err := serve(ctx, env, inv, scoped, log); err != nil {
		log.Error("agent failed", "error", err.Error())
		return fmt.Errorf("%w: %w", errLogged, err)
	}
	return nil
}

// serve runs the agent until ctx ends, then says it is stopping, stops
// the task in hand (given back to the queue unless it finished) and
// drains the connection.
func serve(ctx context.Context, env agent.Env, inv invocation, scoped bool, log *slog.Logger) error {
	if inv.mode == modeTask && env.Role == "" {
		return errors.New("task mode needs AGENT_ROLE (orchestrator, worker or monitor)")
	}
	start := time.Now()
	a, err := agent.Connect(ctx, env, log)
	if err != nil {
		return err // "no NATS credential at PATH: ..." when the unit gave none
	}
	log.Info("agent started", "pid", os.Getpid(), "uid", os.Getuid(), "mode", string(inv.mode), "role", env.Role,
		"nats_url", env.NATSURL, "shared_dir", env.SharedDir, "ipc_scoped", scoped, "command", inv.argv)
	if inv.mode == modeTask {
		if _, err := exec.LookPath(inv.argv[0]); err != nil {
			log.Warn("task command not found; every task will fail until it is", "error", err.Error())
		}
	}
	event(a, log, "started", map[string]any{"mode": string(inv.mode), "pid": os.Getpid(), "ipc_scoped": scoped})

	var wg sync.WaitGroup
	wg.Go(func() { a.Heartbeats(ctx, env.Heartbeat) })
	served := make(chan error, 1)
	if inv.mode == modeTask {
		limits := agent.RunLimits{Timeout: env.TaskTimeout, MaxOutput: env.MaxOutput}
		go func() {
			served <- a.ServeTasks(ctx, env.Role, func(ctx context.Context, t agent.Task) wire.Result {
				return agent.RunCommand(ctx, inv.argv, env.Home, t.Payload, limits)
			})
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served: // no role, or the connection closed: fail, systemd restarts us
	}
	log.Info("agent stopping", "uptime_s", int(time.Since(start).Seconds()))
	event(a, log, "stopping", map[string]any{"uptime_s": int(time.Since(start).Seconds())})
	if serveErr == nil && inv.mode == modeTask {
		serveErr = <-served // the task in hand is given back or its result stored
	}
	wg.Wait()
	if err := a.Close(); err != nil {
		log.Warn("leaving the bus", "error", err.Error())
	}
	return serveErr
}

func event(a *agent.Agent, log *slog.Logger, kind string, data map[string]any) {
	if err := a.Event(kind, data); err != nil {
		log.Warn("event", "kind", kind, "error", err.Error())
	}
}
