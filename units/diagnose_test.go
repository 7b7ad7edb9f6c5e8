package units

import (
	"strings"
	"syscall"
	"testing"

	"github.com/flockrun/flock/spec"
)

// Tier: unit. Which wall the rules name for how an agent keeps dying, as
// measured in a booted systemd: Node 20 killed by SIGTRAP, a JVM exiting 1
// with HotSpot's words, under MemoryDenyWriteExecute.
func TestDiagnose(t *testing.T) {
	node := spec.Agent{ID: 2, Level: spec.LevelProcess}
	jit := spec.Agent{ID: 3, Level: spec.LevelProcess, JIT: true}
	gvisor := spec.Agent{ID: 4, Level: spec.LevelGVisor}
	podman := spec.Agent{ID: 5, Level: spec.LevelPodman}
	loop := func(code string, status int) Status {
		return Status{ActiveState: "activating", SubState: "auto-restart", Restarts: 3, LastExit: Exit{code, status}}
	}
	trap, segv, sys := int(syscall.SIGTRAP), int(syscall.SIGSEGV), int(syscall.SIGSYS)
	eperm := strings.Repeat("open /etc/agent.conf: permission denied\n", refusedStorm)
	for _, tc := range []struct {
		name    string
		a       spec.Agent
		st      Status
		journal string
		wall    string // "" for no diagnosis
		fix     string
	}{
		{"V8 killed by SIGTRAP", node, loop("killed", trap), "# Fatal error in , line 0\n# Check failed: 12 == (*__errno_location ()).", "MemoryDenyWriteExecute", "set jit: true on agent 2"},
		{"a JIT's SIGSEGV, dumped", podman, loop("dumped", segv), "", "MemoryDenyWriteExecute", "set jit: true on agent 5"},
		{"HotSpot exits 1 with its words", node, loop("exited", 1), "Error occurred during initialization of VM\nFailed to mark memory page as executable - check if grsecurity/PaX is enabled", "MemoryDenyWriteExecute", "jit: true"},
		{"with jit: true a SIGSEGV is the program's own", jit, loop("killed", segv), "", "", ""},
		{"at gVisor flock-agent's filter refuses W+X too", gvisor, loop("killed", trap), "", "MemoryDenyWriteExecute", "set jit: true on agent 4"},
		{"gVisor's runsc exits 128+SIGTRAP for Node", gvisor, loop("exited", 128+trap), "", "MemoryDenyWriteExecute", "set jit: true on agent 4"},
		{"exit 133 at level process is the program's own", node, loop("exited", 128+trap), "", "", ""},
		{"SIGSYS", node, loop("killed", sys), "", "SystemCallFilter", "level gvisor"},
		{"a storm of refusals", jit, loop("exited", 1), eperm, "the unit's walls", "flockctl explain 3"},
		{"a few refusals are no storm", jit, loop("exited", 1), "permission denied\n", "", ""},
		{"a plain error exit", node, loop("exited", 2), "usage: agent.js CONFIG", "", ""},
		{"no loop: stopped once by hand", node, Status{ActiveState: "inactive", LastExit: Exit{"killed", trap}}, "", "", ""},
		{"failed for good counts as a loop", node, Status{ActiveState: "failed", LastExit: Exit{"killed", trap}}, "", "MemoryDenyWriteExecute", "jit: true"},
		{"running fine after restarts", node, Status{ActiveState: "active", Restarts: 2, LastExit: Exit{"exited", 0}}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := Diagnose(tc.a, tc.st, tc.journal)
			if tc.wall == "" {
				if ok {
					t.Errorf("diagnosed %+v, want none", d)
				}
				return
			}
			if !ok || !strings.HasPrefix(d.Wall, tc.wall) || !strings.Contains(d.Fix, tc.fix) || d.Why == "" {
				t.Errorf("diagnosis %+v (%v), want wall %q with fix %q", d, ok, tc.wall, tc.fix)
			}
		})
	}
}

// Tier: unit.
func TestExitString(t *testing.T) {
	for e, want := range map[Exit]string{
		{}:                               "-",
		{"exited", 1}:                    "exited 1",
		{"killed", int(syscall.SIGTRAP)}: "killed by SIGTRAP",
		{"dumped", int(syscall.SIGSEGV)}: "dumped by SIGSEGV",
		{"killed", 64}:                   "killed by signal 64",
	} {
		if got := e.String(); got != want {
			t.Errorf("%+v: %q, want %q", e, got, want)
		}
	}
}

// Tier: unit. How an exit reads in a sentence of the diagnosis.
func TestExitEnded(t *testing.T) {
	for _, tc := range []struct {
		e    Exit
		want string
	}{
		{Exit{Code: "exited", Status: 1}, "exited 1"},
		{Exit{Code: "killed", Status: 5}, "was killed by SIGTRAP"},
		{Exit{Code: "dumped", Status: 11}, "dumped core on SIGSEGV"},
	} {
		if got := tc.e.Ended(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
