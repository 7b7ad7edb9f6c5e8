package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/bus/wire"
	"github.com/flockrun/flock/spec"
)

func newSend() *cobra.Command {
	var (
		to, id, output string
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send [--to worker|ID] [--id TASK] [--timeout D] [--output text|json] (PAYLOAD | -)",
		Short: "Hand a task to the flock and print its result",
		Long: `send publishes a task (the payload, or stdin with -) to any worker (--to
worker, the default) or to one agent (--to 3), waits for its result and
prints the command's output; --output json prints the whole result. It exits
non-zero when the task failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: choose text or json", output)
			}
			payload := []byte(args[0])
			if args[0] == "-" {
				var err error
				if payload, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return fmt.Errorf("reading the payload from stdin: %w", err)
				}
			}
			f, err := appliedFlock()
			if err != nil {
				return err
			}
			subject, wait, err := taskTarget(f, to)
			if err != nil {
				return err
			}
			if timeout > 0 {
				wait = timeout
			}
			if id == "" {
				id = nuid.Next()
			}
			res, err := sendTask(cmd.Context(), subject, id, payload, wait)
			if err != nil {
				return err
			}
			return printResult(cmd, res, output)
		},
	}
	cmd.Flags().StringVar(&to, "to", "worker", "worker (any worker) or an agent id")
	cmd.Flags().StringVar(&id, "id", "", "the task id (default: a new unique one)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the result (default: the target's task_timeout plus 10s)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (the command's output) or json (the whole result)")
	return cmd
}

// taskTarget is the subject for --to and how long its tasks may take.
func taskTarget(f *spec.Flock, to string) (string, time.Duration, error) {
	const margin = 10 * time.Second
	if n, err := strconv.Atoi(to); err == nil {
		a, ok := f.Agent(n)
		switch {
		case !ok:
			return "", 0, fmt.Errorf("--to %d: no agent %d in the provisioned flock", n, n)
		case a.Role != spec.RoleWorker || len(a.Command) == 0:
			return "", 0, fmt.Errorf("--to %d: agent %d is a %s without a command; only workers with a command take tasks", n, n, a.Role)
		}
		return wire.AgentTasks(n), a.TaskTimeout + margin, nil
	}
	if to != string(spec.RoleWorker) {
		return "", 0, fmt.Errorf("--to %q: give worker (any worker) or an agent id", to)
	}
	var longest time.Duration
	for _, a := range f.Agents {
		if a.Role == spec.RoleWorker && len(a.Command) > 0 && a.TaskTimeout > longest {
			longest = a.TaskTimeout
		}
	}
	if longest == 0 {
		return "", 0, errors.New("--to worker: no worker in the provisioned flock has a command; give one command: [...] in the spec")
	}
	return wire.RoleTasks(to), longest + margin, nil
}

// sendTask publishes a task and waits for its result: the worker's reply,
// or the same result on task.result (a worker mid-task when the bus
// reloads cannot reply, but still publishes there).
func sendTask(ctx context.Context, subject, id string, payload []byte, wait time.Duration) (wire.Result, error) {
	var res wire.Result
	nc, err := operatorConn(ctx)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	inbox := nats.NewInbox()
	in := make(chan *nats.Msg, 64)
	for _, subj := range []string{inbox, wire.ResultSubject} {
		if _, err := nc.ChanSubscribe(subj, in); err != nil {
			return res, fmt.Errorf("subscribing %s: %w", subj, err)
		}
	}
	msg := nats.NewMsg(subject)
	msg.Reply = inbox
	msg.Header.Set(wire.TaskIDHeader, id)
	msg.Data = payload
	if err := nc.PublishMsg(msg); err != nil {
		return res, fmt.Errorf("task %s on %s: %w", id, subject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// Right after provision a worker may still be connecting: when no one
	// is subscribed, the server says so on the inbox; try for 5 s.
	noOne := 0
	for {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("task %s: no result within %s; the agent may still be working (raise --timeout)", id, wait)
		case m := <-in:
			if m.Subject == inbox && m.Header.Get("Status") == "503" {
				if noOne++; noOne > 20 {
					return res, fmt.Errorf("task %s: no agent took it on %s within 5s; see flockctl status (is the worker connected?)", id, subject)
				}
				time.Sleep(250 * time.Millisecond)
				if err := nc.PublishMsg(msg); err != nil {
					return res, fmt.Errorf("task %s on %s: %w", id, subject, err)
				}
				continue
			}
			if m.Header.Get(wire.TaskIDHeader) != id {
				continue // another task's result
			}
			if err := json.Unmarshal(m.Data, &res); err != nil {
				return res, fmt.Errorf("task %s: the result is not JSON (%v): %q", id, err, m.Data)
			}
			return res, nil
		}
	}
}

// operatorConn connects to the bus as the operator; only root can read
// that credential.
func operatorConn(ctx context.Context) (*nats.Conn, error) {
	nc, err := bus.NewSystem().Operator(ctx)
	if errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("%w: the operator's credential is root's only (try sudo)", err)
	}
	return nc, err
}

func printResult(cmd *cobra.Command, res wire.Result, output string) error {
	if output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprint(cmd.OutOrStdout(), res.Output)
		fmt.Fprint(cmd.ErrOrStderr(), res.Stderr)
	}
	if !res.OK {
		return fmt.Errorf("task %s failed on agent %d: %s", res.TaskID, res.Agent, res.Error)
	}
	return nil
}
