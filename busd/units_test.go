package busd

// Tier: unit (units.Fake for systemd).

import (
	"reflect"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// The answers to flock.bus.units are the asked units systemd has loaded,
// with their states, restarts and last exit; a unit it does not have is
// left out.
func TestUnitStates(t *testing.T) {
	u := units.NewFake()
	for _, id := range []int{1, 2, 3} {
		if err := u.Start(t.Context(), units.Unit{Name: spec.UnitName(id)}); err != nil {
			t.Fatal(err)
		}
	}
	u.SetExit(spec.UnitName(1), 3, units.Exit{Code: "killed", Status: 31})
	u.Fail(spec.UnitName(2))
	got, err := unitStates{u}.States(t.Context(), []string{spec.UnitName(1), spec.UnitName(2), spec.UnitName(4)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]wire.AgentUnit{
		spec.UnitName(1): {Unit: spec.UnitName(1), ActiveState: "active", SubState: "running", Restarts: 3, ExitCode: "killed", ExitStatus: 31},
		spec.UnitName(2): {Unit: spec.UnitName(2), ActiveState: "failed", SubState: "failed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("States:\n got %+v\nwant %+v", got, want)
	}
}
