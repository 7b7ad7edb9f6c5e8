package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/internal/version"
)

type versionOpts struct {
	stdio
	output string
}

func newVersion() *cobra.Command {
	var o versionOpts
	cmd := &cobra.Command{
		Use:   "version [--output text|json]",
		Short: "Print flockctl's version, commit and build date",
		Long: `version prints the version, commit and build date make stamped into this
flockctl (the same version as its Debian package). A flockctl built with
plain go build says "devel" and what Go recorded of the checkout instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runVersion(o)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

func runVersion(o versionOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	in := version.Get("flockctl")
	if o.output == "json" {
		_, err := o.out.Write(in.JSON())
		return err
	}
	fmt.Fprintln(o.out, in)
	return nil
}
