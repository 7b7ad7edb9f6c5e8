package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

func newExplain() *cobra.Command {
	var file string
	var count int
	cmd := &cobra.Command{
		Use:   "explain (-f FILE | --agents N) [ID]",
		Short: "Print the isolation level and the exact unit properties of each agent; changes nothing",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := loadFlock(file, count)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, a := range f.Agents {
				if len(args) == 1 && args[0] != strconv.Itoa(a.ID) {
					continue
				}
				u := units.ForAgent(f, a, units.Options{})
				fmt.Fprintf(out, "# %s: user %s (uid %d), role %s, level %s: %s\n",
					u.Name, spec.UserName(a.ID), f.UID(a.ID), a.Role, a.Level, a.Level.Label())
				fmt.Fprintln(out, units.Render(u))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the flock spec")
	cmd.Flags().IntVar(&count, "agents", 0, "explain N default agents")
	return cmd
}
