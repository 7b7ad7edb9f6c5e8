package main

import (
	"context"
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
			return runReconcile(cmd.Context(), stdioOf(cmd))
		},
	}
}

func runReconcile(ctx context.Context, o stdio) error {
	if err := preflight(); err != nil {
		return err
	}
	f, err := plan.LoadState(plan.StatePath)
	if errors.Is(err, plan.ErrNoState) {
		fmt.Fprintln(o.out, "nothing to reconcile: no flock has been provisioned")
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
		fmt.Fprintln(o.out, "another flockctl holds the lock and will converge the host; nothing done")
		return nil
	}
	defer unlock()
	s, err := setUpInstalled(ctx, f, true)
	if err != nil {
		return err
	}
	defer s.close()
	// This runs inside flock.service's start: the bus is up, and
	// restarting it from here would wait on itself.
	p := s.plan.Without(plan.InstallBus, plan.StartBus)
	fmt.Fprint(o.out, p.Summary(planLines))
	err = plan.Apply(ctx, s.host, s.want, p, nil)
	if !p.Empty() {
		recordDrift(events.Journal{}, p, err)
	}
	return applyFailed(o.errOut, err)
}
