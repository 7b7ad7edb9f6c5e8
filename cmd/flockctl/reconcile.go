package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/plan"
)

func newReconcile() *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "Re-apply the last provisioned flock (flock.service runs this at start)",
		Long: `reconcile makes the host match the last provisioned flock again: agents'
transient units and table inet flock are gone after a reboot, and a unit
stopped or a credential deleted by hand is drift. flock.service runs it
once the bus is ready, so at boot the flock comes back by itself. It leaves
flock.service alone, and does nothing while another flockctl holds the lock
(that one converges the host).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := preflight(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			f, err := plan.LoadState(plan.StatePath)
			if errors.Is(err, plan.ErrNoState) {
				fmt.Fprintln(out, "nothing to reconcile: no flock has been provisioned")
				return nil
			}
			if err != nil {
				return err
			}
			unlock, ok, err := tryLockHost()
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(out, "another flockctl holds the lock and will converge the host; nothing done")
				return nil
			}
			defer unlock()
			ctx := cmd.Context()
			w, err := whereFor(f, "", true)
			if err != nil {
				return err
			}
			pl, err := planFor(ctx, f, w)
			if err != nil {
				return err
			}
			defer pl.close()
			// This runs inside flock.service's start: the bus is up, and
			// restarting it from here would wait on itself.
			p := pl.plan.Without(plan.InstallBus, plan.StartBus)
			fmt.Fprint(out, p.Summary(planLines))
			err = plan.Apply(ctx, pl.host, pl.want, p, nil)
			if !p.Empty() {
				recordDrift(events.Journal{}, p, err)
			}
			return applyFailed(cmd.ErrOrStderr(), err)
		},
	}
}
