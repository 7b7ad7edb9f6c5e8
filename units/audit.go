package units

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/flockrun/flock/spec"
)

// AuditPrefix names flockctl audit's units: agent a's walls, running
// flock-agent's probe mode instead of the agent's program.
const AuditPrefix = "flock-audit@"

// ForAudit is agent a's unit with only what it runs changed: `flock-agent
// probe BATCH` as the agent, inside the same User, paths, credential,
// walls and (at a contained level) container, under its own name, which
// carries ours. It does not restart, its container and runtime directory
// are its own (the agent's keep running), and its standard output, the
// answered batch, goes to output, a file systemd opens as root.
func ForAudit(f *spec.Flock, a spec.Agent, o Options, batch []byte, output string) Unit {
	return forAudit(f, a, o, batch, output, "audit")
}

// ForAuditPeer is ForAudit for agent a as the colluding peer of another
// agent's audit: the same unit under a name and container of its own, so
// it runs beside a's own audit unit.
func ForAuditPeer(f *spec.Flock, a spec.Agent, o Options, batch []byte, output string) Unit {
	return forAudit(f, a, o, batch, output, "peer")
}

func forAudit(f *spec.Flock, a spec.Agent, o Options, batch []byte, output, role string) Unit {
	lv := levelOf(f, a, o, []string{"probe", string(batch)}, "-"+role)
	u := forAgent(f, a, o, lv)
	u.Name = AuditUnit(a.ID)
	u.Description = fmt.Sprintf("flock audit of agent %d: %s", a.ID, lv.label)
	if role == "peer" {
		u.Name = AuditPeerUnit(a.ID)
		u.Description = fmt.Sprintf("flock audit's colluding peer, agent %d: %s", a.ID, lv.label)
	}
	u.Hash = ""
	props := u.Properties[:0:0]
	for _, p := range u.Properties {
		switch p.Name {
		case "Restart", "RestartUSec", "RestartSteps", "RestartMaxDelayUSec", "StartLimitIntervalUSec":
			continue
		}
		props = append(props, p)
	}
	// Only the answers in the file: what the runtime or flock-agent says
	// on stderr goes to the journal.
	u.Properties = append(props, Property{"StandardOutputFile", output}, Property{"StandardError", "journal"})
	return u
}

// AuditUnit is the name of agent id's audit unit.
func AuditUnit(id int) string { return AuditPrefix + strconv.Itoa(id) + ".service" }

// AuditPeerUnit is the name of agent id's unit as a colluding peer.
func AuditPeerUnit(id int) string { return AuditPrefix + strconv.Itoa(id) + "-peer.service" }

// auditOwn are the audit unit's own settings: what it runs, where its
// answers go, how it stops. AsLive never takes them from the agent's unit.
var auditOwn = map[string]bool{
	"Type": true, "ExecStart": true, "Environment": true, "WorkingDirectory": true,
	"RuntimeDirectory": true, "StandardOutputFile": true, "StandardError": true,
	"KillMode": true, "TimeoutStopUSec": true, "SuccessExitStatus": true,
}

// seccompWall is the system call filter: three properties that make one
// wall, taken together or not at all (a live errno of "kill" under the
// planned filter would kill the probes instead of refusing them).
var seccompWall = []string{"SystemCallFilter", "SystemCallErrorNumber", "SystemCallArchitectures"}

// AsLive is audit unit u with each wall the agent's unit has in force
// (live, as Properties reads it) where it differs from the plan: the
// probes meet the walls the agent has, not the ones it was meant to have
// (a unit restarted by hand without ProtectSystem is probed without it).
// Taken: values systemd reports in the form they are set (strings,
// booleans, numbers, string lists), the address families, and the system
// call filter when it is gone, turned around (allow/deny) or its errno or
// architectures changed; systemd reports the filter expanded (no @groups),
// so a changed list of names is not seen. Mounts (bind paths, tmpfs) stay
// as planned. took names the walls taken.
func AsLive(u Unit, live map[string]any) (out Unit, took []string) {
	out = u
	out.Properties = make([]Property, 0, len(u.Properties))
	var filter NameList // the planned allow list; none at the container levels
	liveFilter, hasFilter := nameList(live["SystemCallFilter"])
	for _, p := range u.Properties {
		lv, ok := live[p.Name]
		if auditOwn[p.Name] || !ok {
			out.Properties = append(out.Properties, p)
			continue
		}
		if p.Name == "SystemCallFilter" {
			if filter.Names == nil { // the first is the allow list
				filter = p.Value.(NameList)
			}
			out.Properties = append(out.Properties, p)
			continue
		}
		v, ok := asPlanned(p.Value, lv)
		if !ok || equalWall(v, p.Value) {
			out.Properties = append(out.Properties, p)
			continue
		}
		out.Properties = append(out.Properties, Property{p.Name, v})
		took = append(took, p.Name)
	}
	if hasFilter && filter.Names != nil && (liveFilter.Allow != filter.Allow || len(liveFilter.Names) == 0 ||
		slices.Contains(took, "SystemCallErrorNumber") || slices.Contains(took, "SystemCallArchitectures")) {
		// The filter in force, once, as systemd merged it.
		kept := out.Properties[:0]
		done := false
		for _, p := range out.Properties {
			if p.Name == "SystemCallFilter" {
				if done {
					continue
				}
				p, done = Property{p.Name, liveFilter}, true
			}
			kept = append(kept, p)
		}
		out.Properties = kept
		took = append(took, "SystemCallFilter")
	} else {
		// The planned filter: its errno and architectures stay planned.
		for i, p := range out.Properties {
			if slices.Contains(seccompWall, p.Name) {
				out.Properties[i] = u.Properties[i]
			}
		}
		took = slices.DeleteFunc(took, func(n string) bool { return slices.Contains(seccompWall, n) })
	}
	return out, took
}

// equalWall: the same wall, lists in any order (systemd sorts some).
func equalWall(a, b any) bool {
	if x, ok := a.(NameList); ok {
		y, _ := b.(NameList)
		return x.Allow == y.Allow && equalSet(x.Names, y.Names)
	}
	return reflect.DeepEqual(a, b)
}

func equalSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// nameList is a (bas) property as D-Bus decodes it.
func nameList(v any) (NameList, bool) {
	s, ok := v.([]any)
	if !ok || len(s) != 2 {
		return NameList{}, false
	}
	allow, ok1 := s[0].(bool)
	names, ok2 := s[1].([]string)
	return NameList{Allow: allow, Names: names}, ok1 && ok2
}

// asPlanned is live in the Go type of planned, if D-Bus reports that
// property in the type it is set with.
func asPlanned(planned, live any) (any, bool) {
	switch planned.(type) {
	case string, bool, uint64, uint32, int32, []string:
		return live, reflect.TypeOf(planned) == reflect.TypeOf(live)
	case FileMode:
		m, ok := live.(uint32)
		return FileMode(m), ok
	case NameList:
		return nameList(live)
	}
	return nil, false
}
