package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/status"
	"github.com/flockrun/flock/units"
)

type logsOpts struct {
	stdio
	follow bool
	lines  int
	agent  string
}

func newLogs() *cobra.Command {
	var o logsOpts
	cmd := &cobra.Command{
		Use:   "logs ID [-f]",
		Short: "Print an agent's journal and its log file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.agent = stdioOf(cmd), args[0]
			return runLogs(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing as the agent logs")
	cmd.Flags().IntVarP(&o.lines, "lines", "n", 100, "how many recent lines of each to show")
	return cmd
}

func runLogs(ctx context.Context, o logsOpts) error {
	id, err := strconv.Atoi(o.agent)
	if err != nil || id < 1 {
		return fmt.Errorf("agent id %q: give a positive number, e.g. flockctl logs 3", o.agent)
	}
	f, err := appliedFlock()
	if err != nil {
		return err
	}
	a, ok := f.Agent(id)
	if !ok {
		return fmt.Errorf("agent %d is not in the provisioned flock; flockctl status lists them", id)
	}
	if err := preflight(); err != nil {
		return err
	}
	if !o.follow {
		defer printDiagnosis(ctx, o.out, f, a)
	}
	return showLogs(ctx, o.out, id, f.LogPath(id), o.lines, o.follow)
}

// printDiagnosis ends the logs of an agent that keeps dying with the wall
// that likely kills it, as status says it.
func printDiagnosis(ctx context.Context, w io.Writer, f *spec.Flock, a spec.Agent) {
	m, err := units.Connect(ctx)
	if err != nil {
		return
	}
	defer m.Close()
	all, err := m.List(ctx)
	if err != nil {
		return
	}
	for _, st := range all {
		if st.Name != spec.UnitName(a.ID) {
			continue
		}
		st = status.WithExit(ctx, m, st)
		r := status.Of(f, a, st)
		if r.Diagnosis = status.Diagnose(ctx, a, st); r.Diagnosis != nil {
			fmt.Fprintln(w, "==> diagnosis <==")
			status.WriteDiagnoses(w, []status.Agent{r})
		}
	}
}

// showLogs prints the unit's journal, then the agent's own log file; with
// follow it keeps tailing both until ctx ends.
func showLogs(ctx context.Context, w io.Writer, id int, logPath string, lines int, follow bool) error {
	jargs := []string{"--no-pager", "-o", "short-iso", "-n", strconv.Itoa(lines), "-u", spec.UnitName(id)}
	if follow {
		jargs = append(jargs, "-f")
	}
	journal := exec.CommandContext(ctx, "journalctl", jargs...)
	journal.Stdout, journal.Stderr = w, os.Stderr
	fmt.Fprintf(w, "==> journal of %s <==\n", spec.UnitName(id))
	if !follow {
		if err := journal.Run(); err != nil {
			return fmt.Errorf("journalctl %v: %w", jargs, err)
		}
		fmt.Fprintf(w, "==> %s <==\n", logPath)
		_, err := tailFile(w, logPath, lines, 0)
		return err
	}
	if err := journal.Start(); err != nil {
		return fmt.Errorf("journalctl %v: %w", jargs, err)
	}
	defer journal.Wait()
	off, err := tailFile(w, logPath, lines, 0)
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
		off, err = tailFile(w, logPath, -1, off)
	}
	return err
}

// tailFile prints the last n lines of path (everything after off when
// n < 0) and returns the size it read up to. A missing file is empty.
func tailFile(w io.Writer, path string, n int, off int64) (int64, error) {
	const window = 256 << 10 // enough for n recent lines without reading it all
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return off, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return off, err
	}
	size := fi.Size()
	if size < off { // truncated or rotated
		off = 0
	}
	if n >= 0 {
		off = max(0, size-window)
	}
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return off, err
	}
	if n >= 0 {
		buf = lastLines(buf, n)
	}
	_, err = w.Write(buf)
	return size, err
}

func lastLines(data []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	count := 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' && i != len(data)-1 {
			count++
			if count == n {
				return data[i+1:]
			}
		}
	}
	return data
}
