package main

import (
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
	"github.com/flockrun/flock/units"
)

func newProvision() *cobra.Command {
	var (
		file   string
		count  int
		dryRun bool
		host   string
	)
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
			// Root first: an operator without it needs that sentence, not
			// "permission denied" on the spec.
			if err := preflight(); err != nil {
				return err
			}
			f, err := loadFlock(file, count)
			if err != nil {
				return err
			}
			warnSpec(cmd.ErrOrStderr(), f)
			// Which host this is, and its cluster material: refused here,
			// before anything is touched.
			w, err := whereFor(f, host, false)
			if errors.Is(err, errNoMaterial) && dryRun && w.site.Host != "" {
				// What a first run would do once the material is there
				// (the Ansible role copies it before it provisions).
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\nwarning: the plan below is this host's without it: its agents' keys are not the derived ones yet\n", err)
			} else if err != nil {
				return err
			}
			// A dry run changes nothing, so it may show what a first
			// provision would do before the programs are installed.
			if _, err := installed(); err != nil && !dryRun {
				return err
			}
			if err := runtimesFor(f.On(w.site.Host), sandbox.HostRuntimes()); err != nil && !dryRun {
				return err
			}
			// The providers' key files: refused here, dry run or not.
			if err := providerFiles(f, f.On(w.site.Host), file); err != nil {
				return err
			}
			ctx := cmd.Context()
			if !dryRun {
				unlock, err := lockHost(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer unlock()
			}
			start := time.Now()
			pl, err := planFor(ctx, f, w)
			if err != nil {
				return err
			}
			defer pl.close()
			p := pl.plan
			if f.Clustered() && w.secret != nil {
				// The bus reads its route password once, at start.
				changed, err := routePassword(plan.ClusterPassword, w.secret, dryRun)
				if err != nil {
					return err
				}
				if changed && pl.have.Service.ActiveState == "active" && p.Count(plan.StartBus) == 0 {
					p = p.With(plan.Change{Kind: plan.StartBus, Target: units.BusUnit, Why: "its route password changed"})
				}
			}
			out := cmd.OutOrStdout()
			if dryRun {
				fmt.Fprint(out, p.String())
				return nil
			}
			if p.Empty() {
				fmt.Fprintf(out, "nothing to do: %d agents match the spec (%s)\n", len(pl.want.Agents), time.Since(start).Round(time.Millisecond))
				return plan.SaveState(plan.StatePath, f)
			}
			fmt.Fprint(out, p.Summary(planLines))
			drifted := sameSpec(f)
			// The spec is recorded before anything changes: if this run
			// dies half-way, the next one, deprovision --all (its root)
			// and flock.service at boot all know what it was reaching for.
			if err := plan.SaveState(plan.StatePath, f); err != nil {
				return fmt.Errorf("recording the spec in %s: %w", plan.StatePath, err)
			}
			err = plan.Apply(ctx, pl.host, pl.want, p, progressFor(cmd.ErrOrStderr()))
			if drifted {
				recordDrift(events.Journal{}, p, err)
			}
			if err != nil {
				return applyFailed(cmd.ErrOrStderr(), err)
			}
			fmt.Fprintf(out, "provisioned %d agents (%d changes) in %s\n", len(pl.want.Agents), len(p.Changes), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the flock spec (flock.yaml)")
	cmd.Flags().IntVar(&count, "agents", 0, "provision N default agents (ids 1..N) without a spec file")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	cmd.Flags().StringVar(&host, "host", "", hostFlagHelp)
	return cmd
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
