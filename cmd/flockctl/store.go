package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/store"
	"github.com/flockrun/flock/units"
)

func newStore() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Check the bus's store of tasks and results, or move a damaged one aside",
		Long: `The bus keeps tasks, results and dead letters in JetStream's files under
flock.service's state directory (/var/lib/flock-bus). Every record there
carries a checksum. At each start the bus reads them before the server
does: a record that fails its checksum (a torn write, flipped bits) makes
the server cut its file there, so the bus first copies each damaged file
to damaged/<time>/ in the state directory, then puts back every task and
result that proves itself and the server dropped, and says what it could
not keep (journal, flockctl status, flockctl events: store-damaged).

  flockctl store check        what in the store proves itself, and what not
  flockctl store quarantine   move the whole store aside; the bus starts
                              with an empty one and puts back what proves
                              itself in the old one`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newStoreCheck(), newStoreQuarantine())
	return cmd
}

type storeCheckOpts struct {
	stdio
	dir, output string
}

func newStoreCheck() *cobra.Command {
	var o storeCheckOpts
	cmd := &cobra.Command{
		Use:   "check [--dir DIR] [--output text|json]",
		Short: "Say what in the bus's store proves itself by its checksums, and what does not",
		Long: `check reads every stream of the bus's store (its message blocks record by
record, their checksums, the streams' and consumers' metadata and state)
and lists what does not prove itself, what that costs and what the bus
does with it at its next start; and the stores set aside before. It
changes nothing, and exits non-zero when something is damaged. While
flock.service runs, a record being written may read as torn: stop it
for a definite answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runStoreCheck(o)
		},
	}
	cmd.Flags().StringVar(&o.dir, "dir", "", "the bus's state directory (default: flock.service's, "+strings.Join(units.BusStateDirs, " or ")+")")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

func runStoreCheck(o storeCheckOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = busStateDir(); err != nil {
			return err
		}
	}
	r, err := store.Check(dir)
	if err != nil {
		return err
	}
	asides, err := setAside(dir)
	if err != nil {
		return err
	}
	if o.output == "json" {
		if err := printJSON(o.out, storeCheckJSON{Report: r, Aside: asides}); err != nil {
			return err
		}
	} else {
		printCheck(o.out, r, asides)
	}
	if n := len(r.Problems()); n > 0 {
		return fmt.Errorf("the store in %s has %d damaged parts: at its next start (systemctl restart %s) the bus keeps a copy of each and puts back what proves itself; flockctl store quarantine moves the whole store aside", dir, n, units.BusUnit)
	}
	return nil
}

// storeCheckJSON is store check's JSON.
type storeCheckJSON struct {
	store.Report
	Aside []asideTree `json:"aside"`
}

// asideTree is a store, or damaged files, set aside.
type asideTree struct {
	Dir      string `json:"dir"`
	PutBack  bool   `json:"put_back"` // the bus has put back what proved itself in it
	Problems int    `json:"problems"` // what its report.json lists
}

func setAside(dir string) ([]asideTree, error) {
	pending, err := store.Pending(dir)
	if err != nil {
		return nil, err
	}
	names, err := os.ReadDir(filepath.Join(dir, store.AsideDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []asideTree{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []asideTree{}
	for _, n := range names {
		a := asideTree{Dir: filepath.Join(dir, store.AsideDir, n.Name()), PutBack: true}
		for _, p := range pending {
			if p == a.Dir {
				a.PutBack = false
			}
		}
		var r store.Report
		if b, err := os.ReadFile(filepath.Join(a.Dir, store.ReportFile)); err == nil && json.Unmarshal(b, &r) == nil {
			a.Problems = len(r.Problems())
		}
		out = append(out, a)
	}
	return out, nil
}

func printCheck(w io.Writer, r store.Report, asides []asideTree) {
	if len(r.Streams) == 0 {
		fmt.Fprintf(w, "%s: no streams yet\n", r.Dir)
	}
	for _, s := range r.Streams {
		state := "proves itself"
		if len(s.Problems) > 0 {
			state = fmt.Sprintf("%d damaged", len(s.Problems))
		}
		fmt.Fprintf(w, "%-9s %d blocks, %d messages, %d deletions, consumers %s: %s\n", s.Name, s.Blocks, s.Records, s.Tombstones, orNone(s.Consumers), state)
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  %s: %s", p.File, p.What)
			if p.Kept > 0 {
				fmt.Fprintf(w, "; %d messages past it prove themselves (the server alone would drop them; the bus puts them back)", p.Kept)
			}
			fmt.Fprintln(w)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	for _, a := range asides {
		state := "put back by the bus"
		if !a.PutBack {
			state = "to be put back at the bus's next start"
		}
		fmt.Fprintf(w, "set aside: %s (%d damaged parts; %s)\n", a.Dir, a.Problems, state)
	}
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, " ")
}

func newStoreQuarantine() *cobra.Command {
	return &cobra.Command{
		Use:   "quarantine",
		Short: "Move the bus's store aside; the bus starts with an empty one and puts back what proves itself",
		Long: `quarantine stops flock.service, moves the bus's whole store (its state
directory's jetstream/) to damaged/<time>/ beside it, and starts the bus
again. Starting, the bus finds the store set aside and puts back every
task, result and dead letter in it that proves itself by its checksum and
is not done (a task with a stored result is not queued again); what could
not be proven is listed in flockctl status and as a store-damaged event.
Nothing is deleted: the old store stays in damaged/<time>/. Tasks in a
worker's hands at that moment run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStoreQuarantine(cmd.Context(), stdioOf(cmd))
		},
	}
}

func runStoreQuarantine(ctx context.Context, o stdio) error {
	if err := preflight(); err != nil {
		return err
	}
	// Held while the bus is stopped and its store moved, so no provision
	// starts it in between; not while it starts again, so its reconcile
	// runs as at any start.
	unlock, err := lockHost(o.errOut)
	if err != nil {
		return err
	}
	defer func() { unlock() }()
	dir, err := busStateDir()
	if err != nil {
		return err
	}
	m, err := units.Connect(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.StopService(ctx, units.BusUnit); err != nil {
		return fmt.Errorf("stopping %s to move its store: %w", units.BusUnit, err)
	}
	aside, err := store.Quarantine(dir, store.Stamp(time.Now()))
	if err != nil {
		// The store is where it was: the bus goes on with it.
		_ = m.RestartService(ctx, units.BusUnit)
		return err
	}
	fmt.Fprintf(o.out, "moved the store to %s\n", aside)
	unlock()
	unlock = func() {}
	if err := m.RestartService(ctx, units.BusUnit); err != nil {
		return fmt.Errorf("starting %s with an empty store: %w (the old one is in %s)", units.BusUnit, err, aside)
	}
	st, err := bus.NewSystem().Status(ctx)
	if err != nil {
		return fmt.Errorf("%s started, but did not say what it put back: %w (flockctl status)", units.BusUnit, err)
	}
	for _, p := range st.Store {
		// The bus names its state directory as systemd's symlink.
		if filepath.Base(p.Aside) == filepath.Base(aside) {
			fmt.Fprintf(o.out, "stream %s: %s; %d messages put back\n", p.Stream, p.What, p.PutBack)
		}
	}
	return nil
}

// busStateDir is flock.service's StateDirectory, where the bus's store is.
func busStateDir() (string, error) {
	for _, d := range units.BusStateDirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("no store of the bus in %s: flock.service has not run here (flockctl provision starts it), or give --dir", strings.Join(units.BusStateDirs, " or "))
}
