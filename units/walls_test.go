package units

import (
	"context"
	"syscall"
	"testing"

	"github.com/flockrun/flock/spec"
)

// TestAgentOfUnitRoundTrip: what KilledBy needs of an agent's spec (id,
// level, jit) reads back from the unit ForAgent makes, in the Go form
// the fake keeps and in the form D-Bus decodes ExecStart in; a command
// with "$" in it (encoded by agent.UnitArgs) included.
// Tier: unit (no root).
func TestAgentOfUnitRoundTrip(t *testing.T) {
	f := parse(t, goldenSpec)
	for _, a := range f.Agents {
		u := ForAgent(f, a, Options{})
		var execStart, environment any
		for _, p := range u.Properties {
			switch p.Name {
			case "ExecStart":
				execStart = p.Value
			case "Environment":
				environment = p.Value
			}
		}
		c := execStart.([]ExecCommand)[0]
		for form, v := range map[string]any{"planned": execStart, "D-Bus": [][]any{{c.Path, c.Argv, false, uint64(0), uint64(0), uint64(0), uint64(0), uint32(0), int32(0), int32(0)}}} {
			got, err := agentOfUnit(v, environment)
			if err != nil || got.ID != a.ID || got.Level != a.Level || got.JIT != a.JIT {
				t.Errorf("agent %d (%s, jit %v), ExecStart %s: read back %d, %s, jit %v, %v", a.ID, a.Level, a.JIT, form, got.ID, got.Level, got.JIT, err)
			}
		}
	}
	for _, bad := range []struct{ execStart, env any }{
		{nil, []string{"AGENT_ID=1"}},
		{[]ExecCommand{{Path: "/bin/sleep", Argv: []string{"/bin/sleep", "infinity"}}}, "AGENT_ID=1"},
		{[]ExecCommand{{Path: "/bin/sleep", Argv: []string{"/bin/sleep", "infinity"}}}, []string{}},
	} {
		if a, err := agentOfUnit(bad.execStart, bad.env); err == nil {
			t.Errorf("agentOfUnit(%#v, %#v) = %+v, want an error: not a unit of flock's", bad.execStart, bad.env, a)
		}
	}
}

// TestKilledBy: the walls a unit's exit names by itself, at each level,
// with and without jit, and what is no wall's.
// Tier: unit (no root).
func TestKilledBy(t *testing.T) {
	process := spec.Agent{ID: 2, Level: spec.LevelProcess}
	jit := spec.Agent{ID: 3, Level: spec.LevelProcess, JIT: true}
	gvisor := spec.Agent{ID: 4, Level: spec.LevelGVisor}
	trap, segv, sys, kill := int(syscall.SIGTRAP), int(syscall.SIGSEGV), int(syscall.SIGSYS), int(syscall.SIGKILL)
	for _, tc := range []struct {
		a    spec.Agent
		e    Exit
		wall string
	}{
		{process, Exit{"killed", trap}, "MemoryDenyWriteExecute"},
		{process, Exit{"dumped", segv}, "MemoryDenyWriteExecute"},
		{jit, Exit{"dumped", segv}, ""}, // a JIT may crash on its own
		{jit, Exit{"killed", sys}, "SystemCallFilter"},
		{gvisor, Exit{"exited", 128 + trap}, "MemoryDenyWriteExecute"},
		{process, Exit{"exited", 128 + trap}, ""}, // its own exit status
		{process, Exit{"killed", kill}, ""},       // the OOM killer, or an operator
		{process, Exit{"exited", 1}, ""},
		{process, Exit{}, ""},
	} {
		d, ok := KilledBy(tc.a, tc.e)
		if ok != (tc.wall != "") || d.Wall != tc.wall {
			t.Errorf("agent %d (%s, jit %v) %s: %+v, %v; want wall %q", tc.a.ID, tc.a.Level, tc.a.JIT, tc.e, d, ok, tc.wall)
		}
	}
}

// TestFakeUsageWall: the fake names the wall of an exit from the unit it
// was given, as Systemd.Usage does from the unit systemd has.
// Tier: unit (no root).
func TestFakeUsageWall(t *testing.T) {
	f := parse(t, goldenSpec)
	m := NewFake()
	ctx := context.Background()
	for _, a := range f.Agents {
		if err := m.Start(ctx, ForAgent(f, a, Options{})); err != nil {
			t.Fatal(err)
		}
	}
	m.SetExit(spec.UnitName(4), 3, Exit{"killed", int(syscall.SIGTRAP)}) // no jit: a wall
	m.SetExit(spec.UnitName(9), 3, Exit{"killed", int(syscall.SIGTRAP)}) // jit: its own
	us, err := m.Usage(ctx, []string{spec.UnitName(3), spec.UnitName(4), spec.UnitName(9)})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int]string{3: "", 4: "MemoryDenyWriteExecute", 9: ""} {
		if got := us[spec.UnitName(id)].Wall; got != want {
			t.Errorf("agent %d: wall %q, want %q", id, got, want)
		}
	}
}
