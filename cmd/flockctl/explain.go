package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/plan"
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
			for _, v := range plan.Build(f, units.Options{}).Views() {
				a, u, p := v.Agent, v.Unit, v.Bus
				if len(args) == 1 && args[0] != strconv.Itoa(a.ID) {
					continue
				}
				fmt.Fprintf(out, "# %s: user %s (uid %d), role %s, level %s: %s\n",
					u.Name, spec.UserName(a.ID), v.UID, a.Role, a.Level, a.Level.Label())
				if a.JIT && a.Level.DeniesWX(false) {
					fmt.Fprintln(out, "# jit: true: MemoryDenyWriteExecute=no, this wall alone: the agent may map memory writable and then executable,")
					fmt.Fprintln(out, "#   as its JIT must, so code written into such memory can run. systemd-analyze security weighs it 0.1")
					fmt.Fprintln(out, "#   (a level-process unit still rates 1.3 OK, measured); every other wall stays.")
				}
				fmt.Fprintln(out, units.Render(u))
				fmt.Fprintf(out, "# bus: nats user %s, nkey %s (its own, 0400, bound read-only at %s in its unit alone)\n", p.Name, spec.CredPath(p.Name), units.CredentialPath)
				fmt.Fprintf(out, "#   publish:   %s\n#   subscribe: %s\n", strings.Join(p.Publish, " "), strings.Join(p.Subscribe, " "))
				if p.ResponseTTL > 0 {
					fmt.Fprintf(out, "#   answers requests it received for up to %s\n", p.ResponseTTL)
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the flock spec")
	cmd.Flags().IntVar(&count, "agents", 0, "explain N default agents")
	return cmd
}
