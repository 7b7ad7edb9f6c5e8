package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

type sendOpts struct {
	stdio
	to, id, output string
	timeout        time.Duration
	wait, noWait   bool
	waitGiven      bool // --wait was on the command line
	payload        string
	budget         wire.TaskBudget // --budget-usd, --budget-tokens
}

func newSend() *cobra.Command {
	var o sendOpts
	cmd := &cobra.Command{
		Use:   "send [--to worker|ID] [--id TASK] [--budget-usd D] [--budget-tokens N] [--no-wait] [--timeout D] [--output text|json] (PAYLOAD | -)",
		Short: "Hand a task to the flock and print its result",
		Long: `send stores a task (the payload, or stdin with -) in the bus's queue for any
worker (--to worker, the default) or for one agent (--to 3), waits for its
result and prints the command's output; --output json prints the whole
result. It exits non-zero when the task failed.

The task is kept until a worker stored its result: a worker that dies
mid-task leaves it to another. Its id (--id, by default a new one) makes
sending it again within 10 minutes a no-op; send then waits for the first
one's result. With --no-wait, send prints the task id once the task is
stored and returns; flockctl tasks shows what became of it.

--budget-usd and --budget-tokens give the task a budget of its own for
its model requests (beside its worker's task_budget: the smaller of each
applies); past it flock-proxy refuses them. Below the output, send prints
what the task's requests cost, and says when it ran out of its budget.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.payload, o.waitGiven = stdioOf(cmd), args[0], cmd.Flags().Changed("wait")
			return runSend(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "worker", "worker (any worker) or an agent id")
	cmd.Flags().StringVar(&o.id, "id", "", "the task id (default: a new unique one); the same id within 10m is sent once")
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait for the result and print it")
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "print the task id once the bus stored the task, and return")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "how long to wait for the result (default: the target's task_timeout plus 10s)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text (the command's output) or json (the whole result)")
	cmd.Flags().Var(budgetFlag{&o.budget, true}, "budget-usd", "the most the task's model requests may spend, in dollars (e.g. 0.50)")
	cmd.Flags().Var(budgetFlag{&o.budget, false}, "budget-tokens", "the most tokens the task's model requests may use (e.g. 200000)")
	return cmd
}

func runSend(ctx context.Context, o sendOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	if o.noWait && o.waitGiven && o.wait {
		return errors.New("--wait and --no-wait: give one")
	}
	payload := []byte(o.payload)
	if o.payload == "-" {
		var err error
		if payload, err = io.ReadAll(o.in); err != nil {
			return fmt.Errorf("reading the payload from stdin: %w", err)
		}
	}
	f, err := appliedFlock()
	if err != nil {
		return err
	}
	target, err := taskTarget(f, o.to)
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		target.wait = o.timeout
	}
	id := o.id
	if id == "" {
		id = nuid.Next()
	}
	return sendTask(ctx, o.stdio, target, id, payload, o.budget, !o.noWait, o.output)
}

// target is where --to sends a task: its subject, the consumer workers
// take it from, who may take it, and how long its tasks may take.
type target struct {
	subject, consumer string
	who               string
	wait              time.Duration
}

// takesTasks says whether agent a takes tasks: a worker with a command
// (flock-agent runs it per task) or with its own program, which pulls its
// consumers itself (docs/agents.md, "Your own client").
func takesTasks(a spec.Agent) bool {
	return a.Role == spec.RoleWorker && (len(a.Command) > 0 || len(a.Exec) > 0)
}

// taskTarget is where --to sends a task.
func taskTarget(f *spec.Flock, to string) (target, error) {
	const margin = 10 * time.Second
	if n, err := strconv.Atoi(to); err == nil {
		a, ok := f.Agent(n)
		switch {
		case !ok:
			return target{}, fmt.Errorf("--to %d: no agent %d in the provisioned flock", n, n)
		case !takesTasks(a):
			return target{}, fmt.Errorf("--to %d: agent %d takes no tasks (role %s); only workers with command: [...] or their own exec: [...] program take tasks", n, n, a.Role)
		}
		return target{wire.AgentTasks(n), wire.AgentConsumer(n), fmt.Sprintf("agent %d", n), a.TaskTimeout + margin}, nil
	}
	if to != string(spec.RoleWorker) {
		return target{}, fmt.Errorf("--to %q: give worker (any worker) or an agent id", to)
	}
	var longest time.Duration
	var ids []string
	for _, a := range f.Agents {
		if takesTasks(a) {
			ids = append(ids, strconv.Itoa(a.ID))
			longest = max(longest, a.TaskTimeout)
		}
	}
	if len(ids) == 0 {
		return target{}, errors.New("--to worker: no worker in the provisioned flock takes tasks; give a worker command: [...] or its own exec: [...] program in the spec")
	}
	return target{wire.RoleTasks(to), wire.RoleConsumer(to), "any worker (agents " + someOf(ids, 5) + ")", longest + margin}, nil
}

// someOf names at most n of ids and counts the rest, so a message about a
// flock of a thousand stays one readable line.
func someOf(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}

// sendTask stores the task and, with wait, waits for its result (read
// from the results stream, so a result stored before send looks is found
// too) and prints it.
func sendTask(ctx context.Context, o stdio, t target, id string, payload []byte, budget wire.TaskBudget, wait bool, output string) error {
	nc, err := operatorConn(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Asked before sending: once sent, the worker waiting takes it. A
	// hint only: not worth more than a moment (a side of a split cluster
	// does not answer it at all).
	ictx, cancel := context.WithTimeout(ctx, idleWait)
	idle, idleErr := operator.Idle(ictx, nc, t.consumer)
	cancel()
	sent, err := operator.SendTaskWithin(ctx, nc, t.subject, id, payload, budget)
	if err != nil {
		return whyNotStored(ctx, id, err)
	}
	if sent.Duplicate {
		fmt.Fprintf(o.errOut, "task %s was already sent in the last %s; it is not sent again\n", id, wire.TaskDedupWindow)
	} else if idleErr == nil && !idle {
		fmt.Fprintf(o.errOut, "task %s is queued for %s: none is waiting for tasks right now (all busy, or none connected: see flockctl status)\n", id, t.who)
	}
	if !wait {
		fmt.Fprintln(o.out, id)
		return nil
	}
	since := sent.At
	if sent.Duplicate { // the first one's result may be older than this send
		since = since.Add(-wire.TaskDedupWindow)
	}
	wctx, cancel := context.WithTimeout(ctx, t.wait)
	defer cancel()
	res, err := operator.WaitResult(wctx, nc, id, since)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("task %s: no result within %s; it stays queued and runs when a worker takes it (flockctl tasks shows it; --timeout waits longer)", id, t.wait)
	}
	if err != nil {
		return err
	}
	return printResult(o, res, output)
}

// idleWait bounds asking whether a worker waits for the task.
const idleWait = 2 * time.Second

// whyNotStored is err, the failure of sending task id, or, when the bus
// did not answer the send itself but says this host's side of the
// cluster cannot store tasks, that reason.
func whyNotStored(ctx context.Context, id string, err error) error {
	var refused *operator.NotStoredError
	if errors.As(err, &refused) {
		return err
	}
	if why := noQuorum(ctx, bus.NewSystem()); why != "" {
		return &operator.NotStoredError{ID: id, Why: why, Unsure: true}
	}
	return err
}

// noQuorum is why this host's bus, asked through b, says its side of the
// cluster cannot store tasks now, "" when it does not say so (or does
// not answer).
func noQuorum(ctx context.Context, b *bus.System) string {
	st, err := b.Status(ctx)
	if err != nil {
		return ""
	}
	return st.NoQuorum
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

func printResult(o stdio, res wire.Result, output string) error {
	if output == "json" {
		if err := printJSON(o.out, res); err != nil {
			return err
		}
	} else {
		fmt.Fprint(o.out, res.Output)
		fmt.Fprint(o.errOut, res.Stderr)
		writeSpend(o.errOut, res)
	}
	switch {
	case res.OK:
	case res.Agent == 0:
		return fmt.Errorf("task %s failed: %s", res.TaskID, res.Error)
	default:
		return fmt.Errorf("task %s failed on agent %d: %s", res.TaskID, res.Agent, res.Error)
	}
	return nil
}

// writeSpend says below a result what its task's model requests cost,
// and plainly when its budget stopped them; on stderr, so stdout stays
// the command's output.
func writeSpend(w io.Writer, res wire.Result) {
	// A task that made no model request has nothing to say: a worker
	// that calls no model prints its output alone.
	if res.Spend == nil || res.Spend.Requests == 0 && !res.Spend.OutOfBudget {
		return
	}
	fmt.Fprintln(w, "cost:", res.Spend.Line())
	if res.Spend.OutOfBudget {
		fmt.Fprintf(w, "task %s ran out of its budget: flock-proxy refused its model requests past it; send it with a larger --budget-usd or --budget-tokens, or raise its worker's task_budget\n", res.TaskID)
	}
}

// budgetFlag is --budget-usd (usd) or --budget-tokens: a part of the
// task's own budget, read as wire.ParseTaskBudget reads it and refused
// unless above 0, before anything is sent.
type budgetFlag struct {
	b   *wire.TaskBudget
	usd bool
}

func (f budgetFlag) Set(s string) error {
	if f.usd {
		d, err := wire.ParseUSD(s)
		if err != nil || d == 0 {
			return errors.New("give an amount of dollars above 0, e.g. --budget-usd 0.50")
		}
		f.b.USD = d
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return errors.New("give a whole number of tokens above 0, e.g. --budget-tokens 200000")
	}
	f.b.Tokens = n
	return nil
}

func (f budgetFlag) Type() string {
	if f.usd {
		return "dollars"
	}
	return "tokens"
}

// String is the value as Set reads it, "" when not set.
func (f budgetFlag) String() string {
	switch {
	case f.b == nil, f.usd && f.b.USD == 0, !f.usd && f.b.Tokens == 0:
		return ""
	case f.usd:
		return f.b.USD.Decimal()
	}
	return strconv.FormatUint(f.b.Tokens, 10)
}
