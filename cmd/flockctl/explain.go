package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
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
			// The keys are made at provision; the permissions do not depend on them.
			keys := map[string]string{bus.OperatorName: "-"}
			for _, a := range f.Agents {
				keys[spec.UserName(a.ID)] = "-"
			}
			perms := map[int]bus.User{}
			for _, u := range bus.ForFlock(f, keys).Users {
				perms[u.Agent] = u
			}
			for _, a := range f.Agents {
				if len(args) == 1 && args[0] != strconv.Itoa(a.ID) {
					continue
				}
				u := units.ForAgent(f, a, units.Options{})
				fmt.Fprintf(out, "# %s: user %s (uid %d), role %s, level %s: %s\n",
					u.Name, spec.UserName(a.ID), f.UID(a.ID), a.Role, a.Level, a.Level.Label())
				if a.JIT && a.Level != spec.LevelGVisor {
					fmt.Fprintln(out, "# jit: true: MemoryDenyWriteExecute=no, this wall alone: the agent may map memory writable and then executable,")
					fmt.Fprintln(out, "#   as its JIT must, so code written into such memory can run. systemd-analyze security weighs it 0.1")
					fmt.Fprintln(out, "#   (a level-process unit still rates 1.3 OK, measured); every other wall stays.")
				}
				fmt.Fprintln(out, units.Render(u))
				p := perms[a.ID]
				fmt.Fprintf(out, "# bus: nats user %s, nkey %s (the unit reads it as $CREDENTIALS_DIRECTORY/nats)\n", p.Name, spec.CredPath(p.Name))
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
