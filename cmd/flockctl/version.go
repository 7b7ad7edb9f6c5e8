package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/internal/version"
)

func newVersion() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [--output text|json]",
		Short: "Print flockctl's version, commit and build date",
		Long: `version prints the version, commit and build date make stamped into this
flockctl (the same version as its Debian package). A flockctl built with
plain go build says "devel" and what Go recorded of the checkout instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := version.Get("flockctl")
			switch output {
			case "text":
				fmt.Fprintln(cmd.OutOrStdout(), in)
			case "json":
				cmd.OutOrStdout().Write(in.JSON())
			default:
				return fmt.Errorf("--output %q: choose text or json", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
