package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/status"
)

type tasksOpts struct {
	stdio
	output string
	limit  int
}

func newTasks() *cobra.Command {
	var o tasksOpts
	cmd := &cobra.Command{
		Use:   "tasks [--limit N] [--output table|json]",
		Short: "List the tasks the bus holds: pending, running, done and dead-lettered",
		Long: `tasks lists every task still queued (pending: no worker has it yet;
running: handed to a worker and no result stored yet; HOLDER is the worker
holding it now, as the bus's task desk says, "-" while it waits to be handed
out again), then the last --limit results (done) and the last --limit dead
letters (dead: no worker finished it within the bus's max_deliveries; a
failed result was stored for it). Done and dead tasks are newest first.
On a flock of several hosts, HOST is the host of the agent holding the
task, else of the one it is addressed to or that stored its result; every
host's bus is asked which tasks its workers hold (a host that does not
answer within 2 s is named below the table).

COST is what a task's model requests spent: a done task's as its result
keeps it, a running one's so far as flock-proxy says (asked for 1 s; "-"
if it does not answer), marked "out of budget" when its budget stopped it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runTasks(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.limit, "limit", 50, "how many done and how many dead-lettered tasks to show")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

func runTasks(ctx context.Context, o tasksOpts) error {
	if err := checkOutput(o.output, "table", "json"); err != nil {
		return err
	}
	if o.limit < 1 {
		return fmt.Errorf("--limit %d: give at least 1", o.limit)
	}
	reader, err := asReader()
	if err != nil {
		return err
	}
	nc, err := readConn(reader)(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	// On several hosts, each host's desk knows the tasks its
	// workers hold, and answers on a subject of its own: this
	// host's is asked here, the others' through their units.
	placed := tasksPlacement(ctx)
	var desks []string
	if placed != nil && placed.Self() != "" {
		desks = []string{placed.Self()}
	} else if placed != nil {
		desks = placed.Hosts()
	}
	entries, err := operator.ListTasks(ctx, nc, o.limit, desks...)
	if err != nil {
		if why := noQuorum(ctx, readBus(reader)); why != "" {
			return fmt.Errorf("%w; the bus says: %s", err, why)
		}
		return err
	}
	notes := o.out
	if o.output == "json" {
		notes = o.errOut // stdout stays one JSON document
	}
	if placed != nil {
		said, err := operator.GatherUnits(ctx, nc, placed.Others(), operator.GatherWait)
		operator.AddHolders(entries, said)
		defer status.WriteSilent(notes, placed.Others(), said, err)
	}
	if !reader { // the proxy answers the operator alone what a task spent
		operator.AddSpend(ctx, nc, entries, operator.SpendWait)
	}
	if o.output == "json" {
		return status.WriteTasksJSON(o.out, entries, placed)
	}
	status.WriteTasks(o.out, entries, time.Now(), placed)
	return nil
}

// tasksPlacement is where the agents run, from the bus config and the
// last provisioned spec; nil on one host (or when neither can be read:
// then there is no host to show).
func tasksPlacement(ctx context.Context) *status.Placement {
	cfg, _ := bus.NewSystem().Config(ctx)
	f, err := appliedFlock()
	if err != nil {
		f = nil
	}
	return status.PlacementOf(f, cfg, thisHostOf)
}
