package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// Level is how strongly an agent is isolated: the name of its Driver.
type Level string

// The levels flock ships, weakest first.
const (
	Process Level = "process"
	Podman  Level = "podman"
	GVisor  Level = "gvisor"
)

// Driver is what differs between isolation levels; everything else about
// an agent (its uid, directories, firewall set, bus identity, limits) is
// the same at every level (docs/design.md, "Isolation levels"). A level
// is one file that implements it and registers it.
type Driver interface {
	// Level is the name the spec gives (level: podman).
	Level() Level
	// Profile is what the level asks of the agent's unit, as data.
	Profile() Profile
	// CheckRoot says what is wrong with an agent's root file system fields
	// at this level: the field ("rootfs", "image" or "level") and the
	// problem with its fix; "" when they are right.
	CheckRoot(rootfs, image string) (field, problem string)
	// Gaps are the walls of level process this level cannot close on
	// host h, with the reason; none for a level no weaker than process.
	Gaps(h Host) []Gap
	// Launch runs c in the unit, as root: the launcher's last step. runtime
	// is the Runtime's path on this host, run the unit's runtime directory.
	Launch(c Config, runtime, run string) error
}

// Profile is what a level asks of the unit that runs an agent at it,
// declared as data (as Nomad's task drivers declare their capabilities):
// the units build every agent's unit from it and never ask which level it
// is. The zero Profile is level process's walls with no runtime.
type Profile struct {
	// Rank orders the levels from weakest to strongest.
	Rank int
	// Label is the honest wording of what the level gives.
	Label string
	// Walls are the unit's walls the level keeps.
	Walls Walls
	// Runtime is the program the launcher hands the agent to: set exactly
	// when Walls is ContainerWalls (the zero Runtime: none).
	Runtime Runtime
	// MapsWX: the runtime itself maps writable and executable memory
	// (gVisor's Sentry), so the unit cannot forbid it (flock-agent's
	// filter still does, for the agent's program).
	MapsWX bool
	// SignalExit: the runtime exits 128+n when the agent dies of signal n
	// (podman and runsc do), so the unit's exit status may be a signal.
	SignalExit bool
	// OwnKernel: the runtime answers the agent's system calls with a
	// kernel of its own (gVisor's Sentry), so a call the host's walls
	// forbid (creating a user namespace) is emulated, never the host's.
	OwnKernel bool
	// RuntimeTasks are the threads the runtime itself runs in the unit,
	// added to the agent's tasks limit for its TasksMax= so that the
	// limit counts the agent's own: without them the runtime would eat
	// the agent's share (gVisor's Sentry and gofer alone took all 50 of
	// the default in a VM, and the agent's first fork failed).
	RuntimeTasks uint64
}

// Walls are the sets of walls an agent's unit can keep.
type Walls int

const (
	// ProcessWalls: the unit runs the agent itself, as its own uid, under
	// the whole hardening of level process.
	ProcessWalls Walls = iota
	// ContainerWalls: the unit runs the level's runtime as root, through
	// the launcher, to build the container; the unit keeps what the
	// runtime allows, and the container adds what the unit gives up
	// (units/container.go lists both).
	ContainerWalls
)

// Contained reports whether p runs the agent through a runtime, in a unit
// that keeps less so the runtime can build the container.
func (p Profile) Contained() bool { return p.Walls == ContainerWalls }

// Runtime is a container runtime a level needs on the host.
type Runtime struct {
	Name    string // its name on PATH: podman, runsc
	Default string // where it is expected when not on PATH
	Install string // how to install it, for the operator
}

var drivers []Driver

// Register makes a level known to the spec, the units, the preflight and
// the launcher. It is called from the init of the level's file.
func Register(d Driver) {
	if _, ok := Lookup(d.Level()); ok {
		panic(fmt.Sprintf("sandbox: level %q registered twice", d.Level()))
	}
	if p := d.Profile(); p.Contained() != (p.Runtime.Name != "") {
		panic(fmt.Sprintf("sandbox: level %q: a runtime goes with the container walls, and only with them", d.Level()))
	}
	drivers = append(drivers, d)
	slices.SortStableFunc(drivers, func(a, b Driver) int { return a.Profile().Rank - b.Profile().Rank })
}

// Lookup is the driver of level l.
func Lookup(l Level) (Driver, bool) {
	for _, d := range drivers {
		if d.Level() == l {
			return d, true
		}
	}
	return nil, false
}

// Levels are the registered levels, weakest first.
func Levels() []Level {
	out := make([]Level, len(drivers))
	for i, d := range drivers {
		out[i] = d.Level()
	}
	return out
}

// Contained are the levels that run the agent through a runtime.
func Contained() []Level {
	var out []Level
	for _, d := range drivers {
		if d.Profile().Contained() {
			out = append(out, d.Level())
		}
	}
	return out
}

// Or lists levels for a message: "process, podman or gvisor".
func Or(ls []Level) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = string(l)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Profile is level l's profile; an unknown level's is the zero Profile
// (the walls of level process, the strongest unit) labelled as unknown.
func (l Level) Profile() Profile {
	if d, ok := Lookup(l); ok {
		return d.Profile()
	}
	return Profile{Label: "unknown level " + string(l)}
}

// Contained reports whether l runs the agent through a runtime.
func (l Level) Contained() bool { return l.Profile().Contained() }

// Label is the honest wording of what l gives.
func (l Level) Label() string { return l.Profile().Label }

// DeniesWX reports whether an agent at l, with jit as its spec says, is
// refused memory both writable and executable: at every level unless it
// runs a JIT, by flock-agent's filter (agent.Walls), and by the unit's
// MemoryDenyWriteExecute too where the runtime does not map W+X itself.
func (l Level) DeniesWX(jit bool) bool {
	_, ok := Lookup(l)
	return ok && !jit
}
