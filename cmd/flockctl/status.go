package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/status"
	"github.com/flockrun/flock/units"
)

type statusOpts struct {
	stdio
	file, output string
	ids          []string // the agents asked about; none: every agent
}

func newStatus() *cobra.Command {
	var o statusOpts
	cmd := &cobra.Command{
		Use:   "status [ID...] [-f FILE] [--output table|json]",
		Short: "Show every agent (or the agents ID...): its user, unit state and isolation level; exit 3 when one is not well",
		Long: `status prints a row per agent of the provisioned flock (or of -f FILE),
or of the agents ID... only: its unit's state, its connection to the bus,
its last heartbeat, violations and drift, with notes below the table.

It exits 0 when every agent shown is well (its unit active, connected to
the bus, no drift, its proxy running if it needs one); 3 when one is not
(failed, restarting, starting, stopped, not connected, drifted) or the
whole flock drifted, after printing the table or JSON in full; 4 when the
flock cannot be read (none is provisioned, systemd or the bus does not
answer). An ID not in the flock, a bad flag or spec exits 1, with nothing
printed before the error.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.ids = stdioOf(cmd), args
			return runStatus(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "spec to compare against (default: the last provisioned)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

func runStatus(ctx context.Context, o statusOpts) error {
	if err := checkOutput(o.output, "table", "json"); err != nil {
		return err
	}
	reader, err := asReader()
	if err != nil {
		return err
	}
	f, err := flockFor(o.file)
	if errors.Is(err, plan.ErrNoState) {
		return unreachable(err)
	} else if err != nil {
		return err
	}
	in := "the provisioned flock"
	if o.file != "" {
		in = o.file
	}
	only, err := askedAgents(f, o.ids, in)
	if err != nil {
		return err
	}
	// Drift is what provision would change, planned read-only (as root;
	// a reader is told it was not checked, and 0 then says nothing of it).
	s, err := setUpRead(ctx, f, reader, o.errOut)
	if errors.Is(err, units.ErrNoSystemd) {
		return unreachable(err)
	} else if err != nil {
		return err
	}
	defer s.close()
	r := status.Read(ctx, f, status.Sources{Host: s.host, Have: s.have, Drift: s.plan, Connect: readConn(reader), ThisHost: thisHostOf, Only: only})
	if err := r.Write(o.out, o.errOut, o.output == "json"); err != nil {
		return err
	}
	if c := statusExit(r); c != exitOK {
		return c
	}
	return nil
}

func flockFor(file string) (*spec.Flock, error) {
	if file != "" {
		return spec.Load(file)
	}
	return appliedFlock()
}
