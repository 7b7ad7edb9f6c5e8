package events

// fold turns systemd's several messages about one death into the events
// an operator reads: the process's exit goes into the failure that
// follows it (and a SIGSYS or SIGTRAP makes it a wall's kill); the failure
// of an OOM kill already shown is not shown again; the stop systemd logs
// as the first half of a restart job (JOB_TYPE=restart) is no stop: after
// a scheduled restart it is not shown, else (systemctl restart) it is the
// restart. It keeps the last of each per unit, so it is fed one stream in
// journal order.
type fold struct {
	exit       map[string]exit
	oom        map[string]bool
	restarting map[string]bool
}

func newFold() *fold {
	return &fold{exit: map[string]exit{}, oom: map[string]bool{}, restarting: map[string]bool{}}
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
			if w, ok := wallOf(x); ok {
				m.Kind, m.Detail = WallKilled, m.Detail+"; "+w
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

// wallOf names the wall of flock's an exit is the mark of: a seccomp
// filter that kills (SIGSYS), or a JIT that found memory it may not make
// executable and aborted (SIGTRAP; exit 133, 128+SIGTRAP, from a
// container runtime that reports its child's signal as a status).
func wallOf(x exit) (string, bool) {
	const sigsys, sigtrap = 31, 5
	switch {
	case x.code != "exited" && x.status == sigsys:
		return "a system call its seccomp filter forbids killed it (flockctl explain ID lists the walls)", true
	case x.code != "exited" && x.status == sigtrap, x.code == "exited" && x.status == 128+sigtrap:
		return "likely MemoryDenyWriteExecute: a JIT aborts when it may not make memory executable; jit: true in its spec lifts that wall", true
	}
	return "", false
}
