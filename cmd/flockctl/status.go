package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/status"
)

type statusOpts struct {
	stdio
	file, output string
}

func newStatus() *cobra.Command {
	var o statusOpts
	cmd := &cobra.Command{
		Use:   "status [-f FILE] [--output table|json]",
		Short: "Show every agent: its user, unit state and isolation level",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
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
	if err != nil {
		return err
	}
	// Drift is what provision would change, planned read-only (as root).
	s, err := setUpRead(ctx, f, reader, o.errOut)
	if err != nil {
		return err
	}
	defer s.close()
	r := status.Read(ctx, f, status.Sources{Host: s.host, Have: s.have, Drift: s.plan, Connect: readConn(reader), ThisHost: thisHostOf})
	return r.Write(o.out, o.errOut, o.output == "json")
}

func flockFor(file string) (*spec.Flock, error) {
	if file != "" {
		return spec.Load(file)
	}
	return appliedFlock()
}
