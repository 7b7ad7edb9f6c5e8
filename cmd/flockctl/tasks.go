package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
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
failed result was stored for it). Done and dead tasks are newest first.`,
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
			entries, err := bus.ListTasks(cmd.Context(), nc, limit)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if entries == nil {
					entries = []bus.TaskEntry{}
				}
				return enc.Encode(entries)
			}
			printTasks(cmd.OutOrStdout(), entries, time.Now())
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "how many done and how many dead-lettered tasks to show")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func printTasks(w io.Writer, entries []bus.TaskEntry, now time.Time) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no tasks: none queued, no results or dead letters kept")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tTASK\tSUBJECT\tAGENT\tHOLDER\tAGE\tOUTCOME")
	for _, e := range entries {
		agent := "-"
		if e.Agent > 0 {
			agent = strconv.Itoa(e.Agent)
		} else if e.State == bus.Done {
			agent = "bus"
		}
		holder := "-"
		if e.Holder > 0 {
			holder = strconv.Itoa(e.Holder)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.State, e.ID, e.Subject, agent, holder, now.Sub(e.Time).Round(time.Second), outcome(e))
	}
	tw.Flush()
}

// outcome says in words how a task ended, or what holds it.
func outcome(e bus.TaskEntry) string {
	switch {
	case e.Note != "":
		return e.Note
	case e.State == bus.Dead:
		return fmt.Sprintf("after %d deliveries", e.Deliveries)
	case e.OK != nil && *e.OK:
		return "ok"
	case e.OK != nil:
		return "failed: " + e.Error
	}
	return "-"
}
