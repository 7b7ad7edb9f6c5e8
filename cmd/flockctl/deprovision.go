package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

type deprovisionOpts struct {
	stdio
	file       string
	all, purge bool
}

func newDeprovision() *cobra.Command {
	var o deprovisionOpts
	cmd := &cobra.Command{
		Use:   "deprovision (-f FILE | --all) [--purge]",
		Short: "Stop agents and remove their units, users and firewall rules",
		Long: `deprovision -f FILE removes the agents that FILE names; --all removes
everything flock created on this host. Agents' directories and logs, and
the bus's store of tasks and results, are kept unless --purge is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runDeprovision(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "spec naming the agents to remove")
	cmd.Flags().BoolVar(&o.all, "all", false, "remove everything flock created on this host")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also delete the agents' directories and logs (with --all: and the bus's store and the cluster's material)")
	return cmd
}

func runDeprovision(ctx context.Context, o deprovisionOpts) error {
	if (o.file == "") == !o.all {
		return errors.New("give either -f FILE (the agents to remove) or --all")
	}
	if err := preflight(); err != nil {
		return err
	}
	var gone *spec.Flock
	if o.file != "" {
		var err error
		if gone, err = spec.Load(o.file); err != nil {
			return err
		}
	}
	h, _, closeHost, err := openHost(ctx, nil)
	if err != nil {
		return err
	}
	defer closeHost()
	unlock, err := lockHost(o.errOut)
	if err != nil {
		return err
	}
	defer unlock()
	applied, err := plan.LoadState(plan.StatePath)
	if err != nil && !errors.Is(err, plan.ErrNoState) {
		return err
	}
	if o.all {
		root := spec.DefaultRoot
		if applied != nil {
			root = applied.Root
		}
		if err := plan.RemoveAll(ctx, h, root, o.purge); err != nil {
			return err
		}
		if err := plan.RemoveState(plan.StateDir); err != nil {
			return err
		}
		fmt.Fprintln(o.out, "removed every flock unit, user, group and table inet flock"+purged(o.purge, root))
		return nil
	}
	if applied == nil {
		applied = gone
	}
	if applied.Clustered() {
		// Every host's bus lists every agent: a removal here alone
		// would part this host's bus from the others'.
		return errors.New("the flock spans several hosts: remove the agents from the spec and provision every host with it (ansible-playbook ansible/site.yml), or remove everything here with deprovision --all")
	}
	ids := make([]int, 0, len(gone.Agents))
	for _, a := range gone.Agents {
		ids = append(ids, a.ID)
	}
	rest, err := plan.Remove(ctx, h, applied, ids, o.purge)
	if err != nil {
		return err
	}
	if err := plan.SaveState(plan.StatePath, rest); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "removed %d agents; %d remain\n", len(ids), len(rest.Agents))
	return nil
}

func purged(purge bool, root string) string {
	if purge {
		return " and " + root
	}
	return "; directories kept under " + root
}
