package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

type deprovisionOpts struct {
	stdio
	file        string
	all, purge  bool
	yes, dryRun bool
	terminal    func(io.Reader) bool // whether in is a terminal to ask on; nil: isTerminal
	state       string               // the applied flock; "": plan.StatePath
}

func newDeprovision() *cobra.Command {
	var o deprovisionOpts
	cmd := &cobra.Command{
		Use:   "deprovision (-f FILE | --all) [--purge] [--yes | --dry-run]",
		Short: "Stop agents and remove their units, users and firewall rules, after showing what and asking",
		Long: `deprovision -f FILE removes the agents that FILE names; --all removes
everything flock created on this host. Agents' directories and logs, and
the bus's store of tasks and results, are kept unless --purge is given.

It first prints what it will remove (and what it keeps), then asks
"Remove this? [y/N]" on a terminal; any answer but y or yes changes
nothing. Scripts pass --yes; without a terminal and without --yes it
refuses before it changes anything. --dry-run prints what it would remove
and exits 0 when there is nothing to remove, 2 when there is something.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runDeprovision(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "spec naming the agents to remove")
	cmd.Flags().BoolVar(&o.all, "all", false, "remove everything flock created on this host")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also delete the agents' directories and logs (with --all: and the bus's store and the cluster's material)")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "remove without asking (for scripts)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be removed and change nothing (exit 2 when there is something)")
	return cmd
}

// check refuses what deprovision cannot do before it reads the host: both
// or neither of -f and --all, and a question no one can answer.
func (o deprovisionOpts) check() error {
	if (o.file == "") == !o.all {
		return errors.New("give either -f FILE (the agents to remove) or --all")
	}
	if o.yes && o.dryRun {
		return errors.New("give --yes (remove) or --dry-run (only show), not both")
	}
	// Root's before the question of a terminal: one who may not remove
	// anything is told so, not how to skip the question.
	if err := needRoot(); err != nil {
		return err
	}
	terminal := o.terminal
	if terminal == nil {
		terminal = isTerminal
	}
	if !o.yes && !o.dryRun && !terminal(o.in) {
		return errors.New("deprovision asks before it removes anything, and stdin is not a terminal: pass --yes to remove without asking (or --dry-run to see what it would remove); nothing was changed")
	}
	return nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runDeprovision(ctx context.Context, o deprovisionOpts) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := preflight(); err != nil {
		return err
	}
	var gone *spec.Flock
	if o.file != "" {
		var err error
		if gone, err = spec.Load(o.file); err != nil {
			return err
		}
	}
	h, _, closeHost, err := openHost(ctx, nil)
	if err != nil {
		return err
	}
	defer closeHost()
	// Held from the reading to the removal: what is shown is what goes.
	unlock, err := lockHost(o.errOut)
	if err != nil {
		return err
	}
	defer unlock()
	return deprovisionOn(ctx, o, h, gone)
}

// deprovisionOn shows what deprovision would remove from h, asks (unless
// --yes or --dry-run), and removes it. gone is -f FILE's flock (nil with
// --all).
func deprovisionOn(ctx context.Context, o deprovisionOpts, h plan.Host, gone *spec.Flock) error {
	if o.state == "" {
		o.state = plan.StatePath
	}
	applied, err := plan.LoadState(o.state)
	if err != nil && !errors.Is(err, plan.ErrNoState) {
		return err
	}
	var r plan.Removal
	root := spec.DefaultRoot
	if o.all {
		if applied != nil {
			root = applied.Root
		}
		if r, err = plan.ReadRemovalAll(ctx, h, root, o.purge); err != nil {
			return err
		}
		if applied != nil {
			r.Flock = append(r.Flock, "the record of the provisioned flock ("+o.state+")")
		}
	} else {
		if applied == nil {
			applied = gone
		}
		if applied.Clustered() {
			// Every host's bus lists every agent: a removal here alone
			// would part this host's bus from the others'.
			return errors.New("the flock spans several hosts: remove the agents from the spec and provision every host with it (ansible-playbook ansible/site.yml), or remove everything here with deprovision --all")
		}
		if r, err = plan.ReadRemoval(ctx, h, applied, gone.IDs(), o.purge); err != nil {
			return err
		}
	}
	fmt.Fprint(o.out, r.String())
	switch {
	case r.Empty():
		return nil
	case o.dryRun:
		return exitPending
	case !o.yes:
		if err := confirm(o.stdio); err != nil {
			return err
		}
	}
	if o.all {
		if err := plan.RemoveAll(ctx, h, root, o.purge); err != nil {
			return err
		}
		if err := plan.RemoveState(filepath.Dir(o.state)); err != nil {
			return err
		}
		fmt.Fprintln(o.out, "removed every flock unit, agent user and group, and table inet flock"+purged(o.purge, root))
		return nil
	}
	rest, err := plan.Remove(ctx, h, applied, r.Agents, o.purge)
	if err != nil {
		return err
	}
	if err := plan.SaveState(o.state, rest); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "removed %d agents; %d remain\n", len(r.Agents), len(rest.Agents))
	return nil
}

// confirm asks on the terminal whether to go on; anything but y or yes
// (or no answer) is no.
func confirm(o stdio) error {
	fmt.Fprint(o.errOut, "Remove this? [y/N] ")
	answer, _ := bufio.NewReader(o.in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not confirmed: nothing was changed")
}

func purged(purge bool, root string) string {
	if purge {
		return " and " + root
	}
	return "; directories kept under " + root
}
