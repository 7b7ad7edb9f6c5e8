package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

type provisionOpts struct {
	stdio
	file   string
	count  int
	dryRun bool
	host   string
}

func newProvision() *cobra.Command {
	var o provisionOpts
	cmd := &cobra.Command{
		Use:   "provision (-f FILE | --agents N) [--host NAME] [--dry-run]",
		Short: "Make the host match the spec: users, directories, firewall, one unit per agent",
		Long: `provision validates the spec, plans the desired state, diffs it against the
host and applies only the difference. Running it again with the same spec
changes nothing and restarts no agent; an agent removed from the spec is
deprovisioned (its directory is kept; use deprovision --purge to remove it).

In a flock on several hosts (the spec's hosts:) it provisions this host:
users for every agent, but directories, credentials, units and firewall
rules for this host's agents alone, and a bus that joins the others'.
--host names which host this is; without it, the one whose address this
machine has. The cluster's material must be in /etc/flock/cluster first
(flockctl cluster certs, or the Ansible role).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runProvision(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "the flock spec (flock.yaml)")
	cmd.Flags().IntVar(&o.count, "agents", 0, "provision N default agents (ids 1..N) without a spec file")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan and change nothing")
	cmd.Flags().StringVar(&o.host, "host", "", hostFlagHelp)
	return cmd
}

func runProvision(ctx context.Context, o provisionOpts) error {
	f, w, err := provisionable(o)
	if err != nil {
		return err
	}
	if !o.dryRun {
		unlock, err := lockHost(o.errOut)
		if err != nil {
			return err
		}
		defer unlock()
	}
	start := time.Now()
	// The placeholders the units hold are drawn from a key made once.
	w.makeKey = !o.dryRun
	s, err := setUp(ctx, f, w, true)
	if err != nil {
		return err
	}
	defer s.close()
	p := s.plan
	if f.Clustered() && w.secret != nil {
		// The bus reads its route password once, at start.
		changed, err := routePassword(plan.ClusterPassword, w.secret, o.dryRun)
		if err != nil {
			return err
		}
		if changed && s.have.Service.ActiveState == "active" && p.Count(plan.StartBus) == 0 {
			p = p.With(plan.Change{Kind: plan.StartBus, Target: units.BusUnit, Why: "its route password changed"})
		}
	}
	if o.dryRun {
		fmt.Fprint(o.out, p.String())
		return nil
	}
	if p.Empty() {
		fmt.Fprintf(o.out, "nothing to do: %d agents match the spec (%s)\n", len(s.want.Agents), time.Since(start).Round(time.Millisecond))
		return plan.SaveState(plan.StatePath, f)
	}
	fmt.Fprint(o.out, p.Summary(planLines))
	drifted := sameSpec(f)
	// The spec is recorded before anything changes: if this run
	// dies half-way, the next one, deprovision --all (its root)
	// and flock.service at boot all know what it was reaching for.
	if err := plan.SaveState(plan.StatePath, f); err != nil {
		return fmt.Errorf("recording the spec in %s: %w", plan.StatePath, err)
	}
	s.host.Say = func(format string, args ...any) { fmt.Fprintf(o.out, format, args...) }
	err = plan.Apply(ctx, s.host, s.want, p, progressFor(o.errOut))
	if drifted {
		recordDrift(events.Journal{}, p, err)
	}
	if err != nil {
		return applyFailed(o.errOut, err)
	}
	fmt.Fprintf(o.out, "provisioned %d agents (%d changes) in %s\n", len(s.want.Agents), len(p.Changes), time.Since(start).Round(time.Millisecond))
	return nil
}

// provisionable reads the spec and refuses, before anything is touched,
// what would stop a provision of this host: no root, a bad spec, an
// unknown host or its missing cluster material, programs or runtimes not
// installed. A dry run is refused less: it shows what a first run would do.
func provisionable(o provisionOpts) (*spec.Flock, where, error) {
	// Root first: an operator without it needs that sentence, not
	// "permission denied" on the spec.
	if err := preflight(); err != nil {
		return nil, where{}, err
	}
	f, err := loadFlock(o.file, o.count)
	if err != nil {
		return nil, where{}, err
	}
	warnSpec(o.errOut, f)
	w, err := whereFor(f, o.host, false)
	if errors.Is(err, errNoMaterial) && o.dryRun && w.site.Host != "" {
		// What a first run would do once the material is there
		// (the Ansible role copies it before it provisions).
		fmt.Fprintf(o.errOut, "warning: %v\nwarning: the plan below is this host's without it: its agents' keys are not the derived ones yet\n", err)
	} else if err != nil {
		return nil, where{}, err
	}
	if _, err := installed(); err != nil && !o.dryRun {
		return nil, where{}, err
	}
	if err := runtimesFor(f.On(w.site.Host), sandbox.HostRuntimes()); err != nil && !o.dryRun {
		return nil, where{}, err
	}
	// The providers' key files and the secrets': refused here, dry run
	// or not.
	if err := rootFiles(f, f.On(w.site.Host), o.file); err != nil {
		return nil, where{}, err
	}
	return f, w, nil
}

// planLines is how many changes provision lists one by one; a larger
// plan is summed up by kind (--dry-run lists every change).
const planLines = 40

// applyFailed says where an apply that stopped part-way left the host,
// then returns its error.
func applyFailed(w io.Writer, err error) error {
	var ae *plan.ApplyError
	if errors.As(err, &ae) {
		fmt.Fprint(w, ae.Report())
	}
	return err
}

// progressFor draws a bar on a terminal and a line per quarter elsewhere,
// once there are enough units for it to matter.
func progressFor(w io.Writer) plan.Progress {
	const worthIt = 10
	var bar *progressbar.ProgressBar
	lastQuarter := 0
	return func(done, total int) {
		if total < worthIt {
			return
		}
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
					progressbar.OptionSetDescription("starting agents"), progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(done)
			return
		}
		if q := done * 4 / total; q > lastQuarter {
			lastQuarter = q
			fmt.Fprintf(w, "started %d/%d agents\n", done, total)
		}
	}
}
