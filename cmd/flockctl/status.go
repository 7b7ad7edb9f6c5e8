package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/status"
)

func newStatus() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "status [-f FILE] [--output table|json]",
		Short: "Show every agent: its user, unit state and isolation level",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: choose table or json", output)
			}
			f, err := flockFor(file)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// Drift is what provision would change, planned read-only.
			w, err := whereFor(f, "", true)
			if err != nil {
				return err
			}
			pl, err := planFor(ctx, f, w)
			if err != nil {
				return err
			}
			defer pl.close()
			r := status.Read(ctx, f, status.Sources{Host: pl.host, Have: pl.have, Drift: pl.plan, Connect: operatorConn, ThisHost: thisHostOf})
			return r.Write(cmd.OutOrStdout(), cmd.ErrOrStderr(), output == "json")
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "spec to compare against (default: the last provisioned)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func flockFor(file string) (*spec.Flock, error) {
	if file != "" {
		return spec.Load(file)
	}
	return appliedFlock()
}
