package events

import (
	"slices"
	"testing"
)

// TestFold: systemd's messages about one death become the events an
// operator reads. Tier: unit (no root).
func TestFold(t *testing.T) {
	const u = "flock-agent@4.service"
	sd := func(k Kind, extra func(*mapped)) mapped {
		m := mapped{Event: Event{Agent: 4, Kind: k, Detail: string(k)}, unit: u}
		if extra != nil {
			extra(&m)
		}
		return m
	}
	exited := func(code string, status int) mapped {
		return sd(exitKind, func(m *mapped) { m.exit = exit{code, status} })
	}
	restartJob := sd(Stopped, func(m *mapped) { m.job = "restart" })
	failed := func(result string) mapped {
		return sd(Failed, func(m *mapped) { m.result, m.Detail = result, u+" failed (result "+result+")" })
	}
	for _, tc := range []struct {
		name string
		in   []mapped
		want []string
	}{
		{"seccomp kill", []mapped{exited("killed", 31), failed("signal")},
			[]string{"wall-killed: flock-agent@4.service failed (result signal): main process killed by SIGSYS; SystemCallFilter"}},
		{"a JIT under W^X, in a container", []mapped{exited("exited", 133), failed("exit-code")},
			[]string{"wall-killed: flock-agent@4.service failed (result exit-code): main process exited with status 133; MemoryDenyWriteExecute"}},
		{"an exit of its own", []mapped{exited("exited", 1), failed("exit-code")},
			[]string{"failed: flock-agent@4.service failed (result exit-code): main process exited with status 1"}},
		{"OOM kill, restart", []mapped{sd(OOMKilled, nil), exited("killed", 9), failed("oom-kill"), sd(Restarted, nil), restartJob, sd(Started, nil)},
			[]string{"oom-killed: oom-killed", "restarted: restarted", "started: started"}},
		{"a stop by hand while a restart is pending", []mapped{sd(Restarted, nil), restartJob, sd(Stopped, nil)},
			[]string{"restarted: restarted", "stopped: stopped"}},
		{"systemctl restart", []mapped{sd(Started, nil), restartJob, sd(Started, nil)},
			[]string{"started: started", "restarted: flock-agent@4.service restarted (a restart job: systemctl restart)", "started: started"}},
		{"other sources pass", []mapped{{Event: Event{Kind: BusViolation, Detail: "x"}}}, []string{"bus-violation: x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A stand-in for units.Diagnose: SIGSYS is a wall, and exit 133.
			f := newFold(func(agent int, code string, status int) (string, bool) {
				if agent != 4 {
					t.Errorf("asked about agent %d", agent)
				}
				switch {
				case code == "killed" && status == 31:
					return "SystemCallFilter", true
				case code == "exited" && status == 133:
					return "MemoryDenyWriteExecute", true
				}
				return "", false
			})
			var got []string
			for _, m := range tc.in {
				if e, ok := f.next(m); ok {
					got = append(got, string(e.Kind)+": "+e.Detail)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
