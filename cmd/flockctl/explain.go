package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

type explainOpts struct {
	stdio
	file, output string
	count        int
	specOnly     bool
	args         []string
}

func newExplain() *cobra.Command {
	var o explainOpts
	cmd := &cobra.Command{
		Use:   "explain ID [--output text|json] | explain (-f FILE | --agents N | --spec) [ID]",
		Short: "Show an agent's walls as the live host has them, and any drift (as root); with a spec, what it would get; changes nothing",
		Long: `explain ID reads agent ID of the provisioned flock from the live host (as root):
its unit's properties as systemd has them, the firewall rules of its uid, its
paths with modes, owners and ACLs, its bus permissions as the running bus has
them, its egress, limits, level and label, the kernel's Landlock features, its
systemd-analyze security exposure, and where any of it differs from the plan.

With -f FILE or --agents N (or --spec, the provisioned flock's spec) it prints
what the spec gives each agent, without root and without reading the host;
with --output json, a list of them, one per agent.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.args = stdioOf(cmd), args
			return runExplain(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "explain this spec instead of the live host")
	cmd.Flags().IntVar(&o.count, "agents", 0, "explain N default agents instead of the live host")
	cmd.Flags().BoolVar(&o.specOnly, "spec", false, "explain the provisioned flock's spec, not the live host")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

func runExplain(ctx context.Context, o explainOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	if o.file != "" || o.count > 0 || o.specOnly {
		f, err := explainedSpec(o.file, o.count)
		if err != nil {
			return err
		}
		warnSpec(o.errOut, f)
		only := ""
		if len(o.args) == 1 {
			only = o.args[0]
		}
		if o.output == "json" {
			return printJSON(o.out, explain.Spec(f, only, explain.HostKernel()))
		}
		explain.WriteSpec(o.out, f, only, explain.HostKernel())
		return nil
	}
	if len(o.args) != 1 {
		return errors.New("name the agent: flockctl explain ID (as root), or explain a spec: flockctl explain -f FILE [ID]")
	}
	id, err := strconv.Atoi(o.args[0])
	if err != nil || id <= 0 {
		return fmt.Errorf("agent %q: an id is a positive number, as in the spec (flockctl status lists them)", o.args[0])
	}
	if os.Geteuid() != 0 {
		return errors.New("flockctl explain ID reads the live host and must run as root (try sudo); without root, explain a spec: flockctl explain -f FILE " + o.args[0])
	}
	r, err := explainLive(ctx, id)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return printJSON(o.out, r)
	}
	r.WriteText(o.out)
	return nil
}

func explainedSpec(file string, count int) (*spec.Flock, error) {
	if file == "" && count == 0 {
		return appliedFlock()
	}
	return loadFlock(file, count)
}

// explainLive reads agent id of the provisioned flock from the host.
func explainLive(ctx context.Context, id int) (explain.Report, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	f, err := appliedFlock()
	if err != nil {
		return explain.Report{}, err
	}
	w, err := whereFor(f, "", true)
	if err != nil {
		return explain.Report{}, err
	}
	if a, ok := f.Agent(id); ok && f.Clustered() && a.Host != w.site.Host {
		h, _ := f.HostNamed(a.Host)
		return explain.Report{}, fmt.Errorf("agent %d runs on host %s (%s), not on this one (%s): explain it there, or explain its spec here: flockctl explain --spec %d", id, h.Name, h.Address, w.site.Host, id)
	}
	s, err := setUp(ctx, f, w, false)
	if err != nil {
		return explain.Report{}, err
	}
	defer s.close()
	return explain.Live(ctx, s.explainSources(), s.want, id)
}

// explainSources are this host's boundaries as explain reads them (and
// audit, through explain).
func (s *onHost) explainSources() explain.Sources {
	busHost := bus.NewSystem()
	return explain.Sources{
		Units: s.host.Units, Firewall: s.host.Firewall, Users: s.host.Users,
		Bus:      func(ctx context.Context, id int) (wire.Permissions, error) { return busHost.Permissions(ctx, id) },
		Kernel:   explain.HostKernel,
		Exposure: explain.SystemdExposure,
	}
}
