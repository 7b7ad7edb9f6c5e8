package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

type planOpts struct {
	stdio
	file, state, host, output string
	count                     int
}

func newPlan() *cobra.Command {
	var o planOpts
	cmd := &cobra.Command{
		Use:   "plan (-f FILE | --agents N) [--state FILE] [--host NAME] [--output text|json]",
		Short: "Check a spec and print what provision would do, as any user on any machine; exit 2 when there are changes",
		Long: `plan checks the spec as provision does and prints what provision would do,
line for line as provision --dry-run prints it, without root, systemd or
the host: against a host flock never touched, or against a host state
saved on the host with flockctl state save FILE (--state FILE).

It exits as terraform plan -detailed-exitcode does: 0 when there is
nothing to do, 2 when there are changes, 1 on an error (a bad spec, an
unreadable state).

Off the host it neither reads the providers' key files nor checks that
the agents' names and uids are free, and in a flock on several hosts it
does not hold the agents' keys to the cluster's secret: provision does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runPlan(o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "the flock spec (flock.yaml)")
	cmd.Flags().IntVar(&o.count, "agents", 0, "plan N default agents (ids 1..N) without a spec file")
	cmd.Flags().StringVar(&o.state, "state", "", "a host state flockctl state save wrote (default: a host flock never touched)")
	cmd.Flags().StringVar(&o.host, "host", "", "which of the spec's hosts the plan is for (default: the one the state was saved on)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

// planReport is `flockctl plan --output json`, a stable contract
// (docs/operating.md): fields may be added, none renamed.
type planReport struct {
	// Host is which of the spec's hosts the plan is for; "" on one host.
	Host    string `json:"host,omitempty"`
	Agents  int    `json:"agents"` // the host's agents in the spec
	Pending bool   `json:"pending"`
	// Changes are in the order provision applies them; [] when none.
	Changes []plan.Change `json:"changes"`
}

func runPlan(o planOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	f, err := loadFlock(o.file, o.count)
	if err != nil {
		return err
	}
	// The host's own addresses are not this machine's: the fixed blocks'
	// warnings alone.
	warnSpecFor(o.errOut, f, nil)
	st := plan.HostState{}
	if o.state != "" {
		if st, err = loadHostState(o.state); err != nil {
			return err
		}
	}
	site, err := planSite(f, o.host, st)
	if err != nil {
		return err
	}
	if f.Clustered() {
		fmt.Fprintln(o.errOut, "warning: off the host the agents' keys are not held to the cluster's secret, nor the route password: provision on the host may also replace seeds and restart the bus")
	}
	want := plan.Build(f, site, st.Options)
	have, err := st.Current(want)
	if err != nil {
		return err
	}
	p := plan.Diff(want, have)
	if o.output == "json" {
		r := planReport{Host: site.Host, Agents: len(want.Agents), Pending: !p.Empty(), Changes: p.Changes}
		if r.Changes == nil {
			r.Changes = []plan.Change{}
		}
		if err := printJSON(o.out, r); err != nil {
			return err
		}
	} else {
		fmt.Fprint(o.out, p.String())
	}
	if !p.Empty() {
		return exitPending
	}
	return nil
}

// loadHostState reads a state flockctl state save wrote.
func loadHostState(path string) (plan.HostState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return plan.HostState{}, fmt.Errorf("--state: %w", err)
	}
	st, err := plan.DecodeHostState(b)
	if err != nil {
		return plan.HostState{}, fmt.Errorf("--state %s: %w", path, err)
	}
	return st, nil
}

// planSite is which of f's hosts a plan off the host is for: name
// (--host), else the one the state was saved on. Without the cluster's
// secret its agents' keys are not derived (Site.Keys).
func planSite(f *spec.Flock, name string, st plan.HostState) (plan.Site, error) {
	if !f.Clustered() {
		return plan.Site{}, oneHost(f, name)
	}
	if name == "" && st.BusConfig != nil && st.BusConfig.Cluster != nil {
		name = st.BusConfig.Cluster.Server
	}
	if name == "" {
		return plan.Site{}, fmt.Errorf("a flock on several hosts is planned one host at a time: name it with --host (choose %s)", hostNames(f))
	}
	if err := spreadHost(f, name); err != nil {
		return plan.Site{}, err
	}
	return plan.Site{Host: name}, nil
}
