package units

import (
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
)

// unitLevel is what an agent's level changes in its unit. It is decided
// once, by levelOf, from the profile the level's driver declares
// (sandbox.Profile); forAgent lays it out and asks the level nothing.
type unitLevel struct {
	label string // the level's, for the description
	// args are what flock-agent runs: the mode itself, or the launcher's
	// command line around it (sandbox.Launcher.UnitArgs).
	args []string
	// identity is User=, Group= and SupplementaryGroups= where the unit
	// runs the agent itself; a runtime runs as root and sets the uid.
	identity []Property
	// inaccessible are the host's paths the agent must not reach.
	inaccessible []string
	walls        []Property // the hardening
	// runtimeTasks are added to the agent's tasks (Profile.RuntimeTasks).
	runtimeTasks uint64
}

// levelOf is what agent a's level changes in its unit running mode (the
// arguments of the flock-agent that runs as the agent). suffix tells a
// second container of the agent (flockctl audit's) from its own.
func levelOf(f *spec.Flock, a spec.Agent, o Options, mode []string, suffix string) unitLevel {
	p := a.Level.Profile()
	args := launcher(f, a, o, suffix).UnitArgs(mode)
	switch p.Walls {
	case sandbox.ContainerWalls:
		return unitLevel{
			label: p.Label,
			args:  args,
			// flock's state (credentials); a container has no system
			// D-Bus, and podman's runtime itself may need it.
			inaccessible: []string{"-" + spec.StateDir},
			walls:        containerHardening(f, a, p, suffix),
			runtimeTasks: p.RuntimeTasks,
		}
	default: // sandbox.ProcessWalls, the strongest
		user := spec.UserName(a.ID)
		return unitLevel{
			label:    p.Label,
			args:     args,
			identity: []Property{{"User", user}, {"Group", user}, {"SupplementaryGroups", []string{spec.SharedGroup}}},
			// flock's state (credentials), and the system D-Bus, which
			// every uid may otherwise connect to (flockctl audit found it).
			inaccessible: []string{"-" + spec.StateDir, "-/run/dbus"},
			walls:        processHardening(f, a),
		}
	}
}
