package events

// fold turns systemd's several messages about one death into the events
// an operator reads: the process's exit goes into the failure that
// follows it (and wall, if it names a wall of flock's for that exit, makes
// it a wall's kill); the failure
// of an OOM kill already shown is not shown again; the stop systemd logs
// as the first half of a restart job (JOB_TYPE=restart) is no stop: after
// a scheduled restart it is not shown, else (systemctl restart) it is the
// restart. It keeps the last of each per unit, so it is fed one stream in
// journal order.
type fold struct {
	wall       WallOf
	exit       map[string]exit
	oom        map[string]bool
	restarting map[string]bool
}

// WallOf names the wall of flock's that likely killed agent, given how
// its main process ended (EXIT_CODE exited, killed or dumped, and
// EXIT_STATUS), and the spec change that lifts it; ok false if none does.
// flockctl asks units.Diagnose, which knows the agent's level and jit.
type WallOf func(agent int, code string, status int) (wall string, ok bool)

func newFold(wall WallOf) *fold {
	return &fold{wall: wall, exit: map[string]exit{}, oom: map[string]bool{}, restarting: map[string]bool{}}
}

// next is m as the event to show (ok false: nothing to show).
func (f *fold) next(m mapped) (Event, bool) {
	if m.unit == "" {
		return m.Event, true
	}
	u := m.unit
	switch m.Kind {
	case exitKind:
		f.exit[u] = m.exit
		return Event{}, false
	case OOMKilled:
		f.oom[u] = true
	case Failed:
		x, hadExit := f.exit[u]
		delete(f.exit, u)
		if m.result == "oom-kill" && f.oom[u] {
			delete(f.oom, u)
			return Event{}, false
		}
		if hadExit && m.result != "" {
			m.Detail += ": main process " + x.String()
			if f.wall != nil && m.Agent > 0 {
				if w, ok := f.wall(m.Agent, x.code, x.status); ok {
					m.Kind, m.Detail = WallKilled, m.Detail+"; "+w
				}
			}
		}
	case Restarted:
		f.restarting[u] = true
	case Stopped:
		if m.job == "restart" {
			if f.restarting[u] {
				return Event{}, false
			}
			m.Kind, m.Detail = Restarted, u+" restarted (a restart job: systemctl restart)"
		}
	case Started:
		delete(f.restarting, u)
		delete(f.oom, u)
	}
	return m.Event, true
}
