package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

func newState() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Save what this host has of a flock, for flockctl plan elsewhere",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStateSave())
	return cmd
}

type stateSaveOpts struct {
	stdio
	file, out string
}

func newStateSave() *cobra.Command {
	var o stateSaveOpts
	cmd := &cobra.Command{
		Use:   "save [-f FILE] OUT",
		Short: "Save what provision reads of this host to OUT (- for stdout), as root; changes nothing",
		Long: `save reads this host as provision does before it plans (the flock's
users, units, paths, firewall table, bus identities and config, static
units, the proxy's config; and how this host makes a unit: its systemd,
programs and runtimes) and writes it to OUT, a JSON file without secrets
(public keys only). flockctl plan -f SPEC --state OUT then prints, on any
machine and as any user, what provision of SPEC would do here.

It records the paths of the provisioned flock and of -f FILE: a path of
another spec reads as missing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.out = stdioOf(cmd), args[0]
			return runStateSave(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "also record the paths of this spec (the one to plan)")
	return cmd
}

func runStateSave(ctx context.Context, o stateSaveOpts) error {
	if os.Geteuid() != 0 {
		// Said before openHost's check, whose reason is provision's.
		return errors.New("flockctl state save must run as root: it reads the firewall, systemd's units and the flock's root-only files (try sudo); it changes nothing")
	}
	var flocks []*spec.Flock
	if o.file != "" {
		f, err := spec.Load(o.file)
		if err != nil {
			return err
		}
		flocks = append(flocks, f)
	}
	if f, err := plan.LoadState(plan.StatePath); err == nil {
		flocks = append(flocks, f)
	} else if !errors.Is(err, plan.ErrNoState) {
		return err
	}
	h, uo, closeHost, err := openHost(ctx, nil)
	if err != nil {
		return err
	}
	defer closeHost()
	st, err := plan.Read(ctx, h, plan.FlockPaths(flocks...))
	if err != nil {
		return err
	}
	st.Options = uo
	b, err := plan.EncodeHostState(st)
	if err != nil {
		return err
	}
	if o.out == "-" {
		_, err = o.stdio.out.Write(b)
		return err
	}
	// Nothing secret in it: public keys, modes, unit files.
	if err := renameio.WriteFile(o.out, b, 0o644); err != nil {
		return fmt.Errorf("writing the host state: %w", err)
	}
	fmt.Fprintf(o.errOut, "saved this host's state (%d accounts, %d units) to %s: flockctl plan -f SPEC --state %s prints what provision would do here\n",
		len(st.Accounts), len(st.Units), o.out, o.out)
	return nil
}
