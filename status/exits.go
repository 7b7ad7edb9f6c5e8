package status

import (
	"context"
	"os/exec"
	"sync"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// WithExit adds how often a loaded, not stopped unit restarted and how it
// last ended. A stopped unit is not asked: reading its properties while
// systemd collects it would load it again.
func WithExit(ctx context.Context, m units.Manager, st units.Status) units.Status {
	if st.Name != "" && st.ActiveState != "inactive" {
		st.Restarts, st.LastExit = m.Exit(ctx, st.Name)
	}
	return st
}

// exitReaders bounds the property reads in flight: systemd answers them
// one by one, and pipelining hides the D-Bus round trips (a flock of a
// thousand: three reads each).
const exitReaders = 16

// WithExits is WithExit of every status, read in parallel.
func WithExits(ctx context.Context, m units.Manager, sts []units.Status) []units.Status {
	out := make([]units.Status, len(sts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, exitReaders)
	for i, st := range sts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = WithExit(ctx, m, st)
		}()
	}
	wg.Wait()
	return out
}

// Diagnose names the wall that likely keeps agent a dying, reading the
// tail of its journal only when systemd says it is in a restart loop.
func Diagnose(ctx context.Context, a spec.Agent, st units.Status) *units.Diagnosis {
	if !units.Looping(st) {
		return nil
	}
	out, _ := exec.CommandContext(ctx, "journalctl", "--no-pager", "-o", "cat", "-n", "50", "-u", st.Name).Output()
	if d, ok := units.Diagnose(a, st, string(out)); ok {
		return &d
	}
	return nil
}
