package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/status"
)

type usageOpts struct {
	stdio
	file, output string
	args         []string
}

func newUsage() *cobra.Command {
	var o usageOpts
	cmd := &cobra.Command{
		Use:   "usage [ID] [--output table|json]",
		Short: "Show each agent's use of its model APIs and what it cost: today, this month, and against its limits and budgets",
		Long: `usage shows, for every agent granted a model API (or only agent ID), what
flock-proxy's model gateway counted of its requests: the tokens and
dollars of today and of this month (UTC, the windows the limits count in)
against its limits, every request, token and dollar since it began
(input, output, cache reads and writes), the errors by status and the
requests refused over a limit. Below them, each budget (with ID, the
agent's) against its limits, and the sum of every agent: the flock's
spend. The counts are the proxy's, kept on disk:
an agent cannot forge or reset them, and they survive restarts of the
proxy, of the bus and of the host. Read from the bus, which hears them
from the proxy.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.args = stdioOf(cmd), args
			return runUsage(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "spec whose grants to show (default: the last provisioned)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

// runUsage prints each agent's (or one's) use of its model APIs, from the
// proxy's last report the bus keeps.
func runUsage(ctx context.Context, o usageOpts) error {
	if err := checkOutput(o.output, "table", "json"); err != nil {
		return err
	}
	reader, err := asReader()
	if err != nil {
		return err
	}
	f, err := flockFor(o.file)
	if err != nil {
		return err
	}
	only := 0
	if len(o.args) == 1 {
		if only, err = strconv.Atoi(o.args[0]); err != nil {
			return fmt.Errorf("agent %q: give an agent id, e.g. flockctl usage 3", o.args[0])
		}
		if _, ok := f.Agent(only); !ok {
			return fmt.Errorf("agent %d is not in the spec", only)
		}
	}
	st, err := readBus(reader).Status(ctx)
	if err != nil {
		return fmt.Errorf("asking the bus for the proxy's counts: %w", err)
	}
	u := status.UsageOf(f, st, only, time.Now())
	if o.output == "json" {
		return printJSON(o.out, u)
	}
	if len(u.Models) == 0 {
		fmt.Fprintln(o.out, "no agent is granted a model API (an agent's models: in the spec)")
		return nil
	}
	status.WriteUsage(o.out, u)
	return nil
}
