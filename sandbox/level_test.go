package sandbox

// Tier: unit. Each level's profile is the data the units build its unit
// from; a profile that could not be launched is refused at registration.

import (
	"strings"
	"testing"
)

func TestProfiles(t *testing.T) {
	for _, c := range []struct {
		level                     Level
		walls                     Walls
		runtime                   string
		mapsWX, signalExit, known bool
	}{
		{Process, ProcessWalls, "", false, false, true},
		{Podman, ContainerWalls, "podman", false, true, true},
		{GVisor, ContainerWalls, "runsc", true, true, true},
		// Unknown: the strongest unit, and a label that says so.
		{"vm", ProcessWalls, "", false, false, false},
	} {
		p := c.level.Profile()
		if p.Walls != c.walls || p.Runtime.Name != c.runtime || p.MapsWX != c.mapsWX || p.SignalExit != c.signalExit {
			t.Errorf("%s: %+v", c.level, p)
		}
		if c.level.Contained() != (c.walls == ContainerWalls) {
			t.Errorf("%s: Contained() = %v", c.level, c.level.Contained())
		}
		if known := !strings.HasPrefix(p.Label, "unknown level"); known != c.known || p.Label == "" {
			t.Errorf("%s: label %q", c.level, p.Label)
		}
	}
}

type badProfile struct{ process }

func (badProfile) Level() Level { return "bad" }
func (badProfile) Profile() Profile {
	return Profile{Label: "a runtime under the walls of level process", Runtime: Runtime{Name: "bad-run"}}
}

func TestRegisterRefusesARuntimeWithoutContainerWalls(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `level "bad": a runtime goes with the container walls`) {
			t.Errorf("Register: %v", r)
		}
		if _, ok := Lookup("bad"); ok {
			t.Error("the refused level is registered")
		}
	}()
	Register(badProfile{})
}
