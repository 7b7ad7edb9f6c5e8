package busd

import (
	"context"

	"github.com/flockrun/flock/metrics"
	"github.com/flockrun/flock/wire"
)

// unitStates reads the agents' units for the bus's answers on
// wire.UnitsSubject through what /metrics reads them with. A stopped unit
// is not asked for its restarts: reading its properties while systemd
// collects it would load it again (as status.WithExit).
type unitStates struct{ units metrics.Units }

func (u unitStates) States(ctx context.Context, names []string) (map[string]wire.AgentUnit, error) {
	loaded, err := u.units.List(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]wire.AgentUnit{}
	var running []string
	for _, st := range loaded {
		if !want[st.Name] {
			continue
		}
		out[st.Name] = wire.AgentUnit{Unit: st.Name, ActiveState: st.ActiveState, SubState: st.SubState}
		if st.ActiveState != "inactive" {
			running = append(running, st.Name)
		}
	}
	usage, err := u.units.Usage(ctx, running)
	for name, us := range usage {
		a := out[name]
		a.Restarts, a.ExitCode, a.ExitStatus = us.Restarts, us.LastExit.Code, us.LastExit.Status
		out[name] = a
	}
	return out, err
}
