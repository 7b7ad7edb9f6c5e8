package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

func newTasks() *cobra.Command {
	var output string
	var limit int
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
answer within 2 s is named below the table).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: choose table or json", output)
			}
			if limit < 1 {
				return fmt.Errorf("--limit %d: give at least 1", limit)
			}
			nc, err := operatorConn(cmd.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			// On several hosts, each host's desk knows the tasks its
			// workers hold, and answers on a subject of its own: this
			// host's is asked here, the others' through their units.
			placed := tasksPlacement(cmd.Context())
			var desks []string
			if placed != nil && placed.self != "" {
				desks = []string{placed.self}
			} else if placed != nil {
				desks = placed.hosts
			}
			entries, err := operator.ListTasks(cmd.Context(), nc, limit, desks...)
			if err != nil {
				return err
			}
			notes := cmd.OutOrStdout()
			if output == "json" {
				notes = cmd.ErrOrStderr() // stdout stays one JSON document
			}
			if placed != nil {
				said, err := operator.GatherUnits(cmd.Context(), nc, placed.others(), operator.GatherWait)
				operator.AddHolders(entries, said)
				defer printSilent(notes, placed.others(), said, err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if placed != nil {
					return enc.Encode(withHosts(entries, placed))
				}
				if entries == nil {
					entries = []operator.TaskEntry{}
				}
				return enc.Encode(entries)
			}
			printTasks(cmd.OutOrStdout(), entries, time.Now(), placed)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "how many done and how many dead-lettered tasks to show")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// printTasks is the tasks table; placed (a flock on several hosts) adds
// the HOST column.
func printTasks(w io.Writer, entries []operator.TaskEntry, now time.Time, placed *placement) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no tasks: none queued, no results or dead letters kept")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if placed != nil {
		fmt.Fprintln(tw, "STATE\tTASK\tSUBJECT\tAGENT\tHOLDER\tHOST\tAGE\tOUTCOME")
	} else {
		fmt.Fprintln(tw, "STATE\tTASK\tSUBJECT\tAGENT\tHOLDER\tAGE\tOUTCOME")
	}
	for _, e := range entries {
		agent := "-"
		if e.Agent > 0 {
			agent = strconv.Itoa(e.Agent)
		} else if e.State == operator.Done {
			agent = "bus"
		}
		holder := "-"
		if e.Holder > 0 {
			holder = strconv.Itoa(e.Holder)
		}
		if placed != nil {
			holder += "\t" + cmp.Or(taskHost(e, placed), "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.State, e.ID, e.Subject, agent, holder, now.Sub(e.Time).Round(time.Second), outcome(e))
	}
	tw.Flush()
}

// outcome says in words how a task ended, or what holds it.
func outcome(e operator.TaskEntry) string {
	switch {
	case e.Note != "":
		return e.Note
	case e.State == operator.Dead:
		return fmt.Sprintf("after %d deliveries", e.Deliveries)
	case e.OK != nil && *e.OK:
		return "ok"
	case e.OK != nil:
		return "failed: " + e.Error
	}
	return "-"
}

// taskRow is a task in JSON on several hosts: the entry and its host.
type taskRow struct {
	operator.TaskEntry
	Host string `json:"host,omitempty"`
}

// withHosts is entries with the host of each one's agent.
func withHosts(entries []operator.TaskEntry, placed *placement) []taskRow {
	out := make([]taskRow, 0, len(entries))
	for _, e := range entries {
		out = append(out, taskRow{TaskEntry: e, Host: taskHost(e, placed)})
	}
	return out
}

// taskHost is the host of the agent holding the task, else of the one it
// is addressed to or that stored its result; "" for none (pending, or
// stored by the bus).
func taskHost(e operator.TaskEntry, placed *placement) string {
	switch {
	case e.Holder > 0:
		return placed.host(e.Holder)
	case e.Agent > 0:
		return placed.host(e.Agent)
	}
	return ""
}

// tasksPlacement is where the agents run, from the bus config and the
// last provisioned spec; nil on one host (or when neither can be read:
// then there is no host to show).
func tasksPlacement(ctx context.Context) *placement {
	cfg, _ := bus.NewSystem().Config(ctx)
	f, err := appliedFlock()
	if err != nil {
		f = nil
	}
	return placementOf(f, cfg)
}

// printSilent names the hosts whose desks did not say which tasks their
// workers hold: those tasks show no holder.
func printSilent(w io.Writer, hosts []string, said map[string]wire.HostUnits, askErr error) {
	for _, h := range hosts {
		if _, ok := said[h]; ok {
			continue
		}
		why := "did not answer"
		if askErr != nil {
			why = "could not be asked: " + askErr.Error()
		}
		fmt.Fprintf(w, "note: host %s %s: the tasks its workers hold show no holder\n", h, why)
	}
}
