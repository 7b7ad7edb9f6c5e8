package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/plan"
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
		Short: "Show an agent's walls as the live host has them, and any drift (as root or flock-readers); with a spec, what it would get; changes nothing",
		Long: `explain ID reads agent ID of the provisioned flock from the live host (as root):
its unit's properties as systemd has them, the firewall rules of its uid, its
paths with modes, owners and ACLs, its bus permissions as the running bus has
them, its egress, limits, level and label, the kernel's Landlock features, its
systemd-analyze security exposure, and where any of it differs from the plan.
A member of flock-readers may run it too: the firewall's rules are root's,
and explain names them among what it did not read.

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
		return errors.New("name the agent: flockctl explain ID (as root or flock-readers), or explain a spec: flockctl explain -f FILE [ID]")
	}
	id, err := strconv.Atoi(o.args[0])
	if err != nil || id <= 0 {
		return fmt.Errorf("agent %q: an id is a positive number, as in the spec (flockctl status lists them)", o.args[0])
	}
	reader, err := asReader()
	if err != nil {
		return fmt.Errorf("flockctl explain ID reads the live host: %w; or explain a spec: flockctl explain -f FILE %s", err, o.args[0])
	}
	r, err := explainLive(ctx, id, reader)
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

// explainLive reads agent id of the provisioned flock from the host, as
// root or (reader) as a member of the readers' group: then what only root
// reads (the firewall's rules) is named among what was not read.
func explainLive(ctx context.Context, id int, reader bool) (explain.Report, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	f, err := appliedFlock()
	if err != nil {
		return explain.Report{}, err
	}
	w, err := whereFor(f, "", true)
	if err != nil && !(reader && w.site.Host != "") { // a reader needs no cluster secret
		return explain.Report{}, err
	}
	if a, ok := f.Agent(id); ok && f.Clustered() && a.Host != w.site.Host {
		h, _ := f.HostNamed(a.Host)
		return explain.Report{}, fmt.Errorf("agent %d runs on host %s (%s), not on this one (%s): explain it there, or explain its spec here: flockctl explain --spec %d", id, h.Name, h.Address, w.site.Host, id)
	}
	var s *onHost
	if reader {
		s, err = setUpReader(ctx, f, w)
	} else {
		s, err = setUp(ctx, f, w, false)
	}
	if err != nil {
		return explain.Report{}, err
	}
	defer s.close()
	return explain.Live(ctx, s.explainSources(readBus(reader)), s.want, id)
}

// setUpReader is setUp (not observed) for a member of the readers' group.
func setUpReader(ctx context.Context, f *spec.Flock, w where) (*onHost, error) {
	h, uo, closeHost, err := openReader(ctx)
	if err != nil {
		return nil, err
	}
	return &onHost{host: h, opts: uo, want: plan.Build(f, w.site, uo), close: closeHost}, nil
}

// explainSources are this host's boundaries as explain reads them (and
// audit, through explain), the bus asked through busHost.
func (s *onHost) explainSources(busHost *bus.System) explain.Sources {
	return explain.Sources{
		Units: s.host.Units, Firewall: s.host.Firewall, Users: s.host.Users,
		Bus:      func(ctx context.Context, id int) (wire.Permissions, error) { return busHost.Permissions(ctx, id) },
		Kernel:   explain.HostKernel,
		Exposure: explain.SystemdExposure,
	}
}
