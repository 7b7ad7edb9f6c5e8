package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

type eventsOpts struct {
	stdio
	follow        bool
	since, output string
	agent         int
}

func newEvents() *cobra.Command {
	var o eventsOpts
	cmd := &cobra.Command{
		Use:   "events [-f] [--since D] [--agent ID] [--output text|json]",
		Short: "What happened to the flock, oldest first: starts, deaths, walls, refusals, drift, dead letters",
		Long: `events prints one stream, oldest first, of what an operator wants to know:
agents started, stopped, restarted, OOM-killed, failed or killed by a wall;
bus violations; firewall refusals; egress denials; drift found or
repaired; tasks dead-lettered. It reads journald's structured fields
(systemd's own messages about the units, the kernel's firewall lines, the
records the bus, the proxy and provision write) and the firewall's
per-agent counters. -f keeps printing new events as they happen.
--output json prints one JSON object a line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runEvents(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new events as they happen")
	cmd.Flags().StringVar(&o.since, "since", "1h", "how far back: a duration (30m, 2h, 7d) or a time (2026-11-27T08:00:00Z)")
	cmd.Flags().IntVar(&o.agent, "agent", 0, "only this agent's events")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json (one event a line)")
	return cmd
}

func runEvents(ctx context.Context, o eventsOpts) error {
	opts, err := eventOptions(o.since, o.agent, o.follow, o.output, time.Now())
	if err != nil {
		return err
	}
	reader, err := asReader()
	if err != nil {
		return err
	}
	if !reader {
		if err := preflight(); err != nil {
			return err
		}
	}
	uidBase := uint32(spec.DefaultUIDBase)
	var wall events.WallOf
	if f, err := plan.LoadState(plan.StatePath); err == nil {
		uidBase, wall = f.UIDBase, wallOf(f)
	} else if !errors.Is(err, plan.ErrNoState) {
		return err
	}
	sources := []events.Source{&events.JournalSource{UIDBase: uidBase, Wall: wall}}
	if reader {
		// The firewall's counters are root's; the journal is its
		// readers' (systemd-journal, adm): journalctl refuses anyone else.
		fmt.Fprintf(o.errOut, "the firewall's refusal counts not read: %v\n", errNeedsRoot)
		if !journalReader() {
			fmt.Fprintln(o.errOut, "the system journal is not yours to read, so events shows none of it: add yourself to systemd-journal too (sudo usermod -aG systemd-journal $USER, then log in again)")
			sources = nil
		}
	} else {
		sources = append(sources, &events.CounterSource{UIDBase: uidBase, Read: refusedCounts(netpolicy.New()), KernelLog: kernelLogInJournal(ctx)})
	}
	return events.Stream(ctx, sources, opts, eventPrinter(o.out, o.output))
}

// eventOptions checks the flags, naming the one that is wrong and the fix,
// before anything is read.
func eventOptions(since string, agent int, follow bool, output string, now time.Time) (events.Options, error) {
	o := events.Options{Agent: agent, Follow: follow}
	if err := checkOutput(output, "text", "json"); err != nil {
		return o, err
	}
	if agent < 0 || agent > spec.MaxID {
		return o, fmt.Errorf("--agent %d: give an agent's id, 1..%d (or leave it out for all)", agent, spec.MaxID)
	}
	d, err := parseSince(since)
	if err == nil {
		o.Since = now.Add(-d)
		return o, nil
	}
	if t, terr := time.Parse(time.RFC3339, since); terr == nil {
		o.Since = t
		return o, nil
	}
	return o, fmt.Errorf("--since %q: give a duration (30m, 2h, 7d) or a time (2026-11-27T08:00:00Z)", since)
}

// parseSince is a duration in Go's form, or whole days ("7d").
func parseSince(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err = fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days {
			d = time.Duration(n) * 24 * time.Hour
		} else {
			err = errors.New("not a number of days")
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	return d, err
}

func eventPrinter(w io.Writer, output string) func(events.Event) error {
	return func(e events.Event) error {
		if output == "json" {
			b, err := e.Encode()
			if err != nil {
				return err
			}
			_, err = w.Write(b)
			return err
		}
		_, err := fmt.Fprintln(w, e.Text())
		return err
	}
}

// refusedCounts reads the firewall's per-uid refusals as events counts
// them: events reads the counters and knows nothing of nftables.
func refusedCounts(fw netpolicy.Firewall) func(context.Context) (map[uint32]events.Counts, error) {
	return func(ctx context.Context) (map[uint32]events.Counts, error) {
		r, err := fw.Refused(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[uint32]events.Counts, len(r))
		for uid, c := range r {
			out[uid] = events.Counts{Refused: c.Refused, Logged: c.Logged}
		}
		return out, nil
	}
}

// journalGroups may read the whole system journal (journald's own ACLs).
var journalGroups = []string{"systemd-journal", "adm", "wheel"}

// journalReader says whether this process is in one of journalGroups.
func journalReader() bool {
	gids, err := os.Getgroups()
	if err != nil {
		return false
	}
	for _, gid := range append(gids, os.Getegid()) {
		if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil && slices.Contains(journalGroups, g.Name) {
			return true
		}
	}
	return false
}

// kernelLogInJournal says whether journald reads the kernel's log here:
// any kernel line this boot. In a container (an nspawn machine) it has
// none, and the firewall's refusals are known by its counters alone.
func kernelLogInJournal(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "journalctl", "--no-pager", "--quiet", "-b", "-k", "-n", "1", "-o", "cat").Output()
	return err == nil && len(strings.TrimSpace(string(out))) > 0
}

// wallOf names the wall that likely killed an agent of f as status and
// logs say it (units.KilledBy, from its exit alone: its level and jit
// decide what a signal means), as /metrics does.
func wallOf(f *spec.Flock) events.WallOf {
	return func(agent int, code string, status int) (string, bool) {
		a, ok := f.Agent(agent)
		if !ok {
			return "", false
		}
		d, ok := units.KilledBy(a, units.Exit{Code: code, Status: status})
		if !ok {
			return "", false
		}
		return fmt.Sprintf("likely %s; fix: %s", d.Wall, d.Fix), true
	}
}
