package test

// Tier: root + nspawn. Drift made by hand on a running flock: flockctl
// status names it (on the agent's row, or as a note for the whole flock)
// and exits 3 (4 when its bus cannot be asked), and the next provision
// repairs exactly it, after which status exits 0 again.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

func TestDriftIsSeenAndRepaired(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	spec := "defaults: {heartbeat: 1s}\n" + threeAgents
	provision(t, m, spec)
	waitActive(t, m, 1, 2, 3)
	waitBus(t, m, time.Time{}, 1, 2, 3)
	waitWell(t, m)

	t.Run("status of a few agents", func(t *testing.T) {
		if out, _, code := statusOf(t, m, "2", "--output", "json"); code != statusWell || len(statusRows(t, out)) != 1 || statusRows(t, out)[0].ID != 2 {
			t.Errorf("status 2: exit %d\n%s", code, out)
		}
		if out, _, code := statusOf(t, m, "3", "1"); code != statusWell || !strings.Contains(out, "flock-agent@1.service") ||
			!strings.Contains(out, "flock-agent@3.service") || strings.Contains(out, "flock-agent@2.service") {
			t.Errorf("status 3 1: exit %d\n%s", code, out)
		}
		for _, arg := range []string{"99", "two"} {
			out, errOut, err := run(t, m, "flockctl", "status", arg)
			var re *harness.RunError
			if !errors.As(err, &re) || re.ExitCode != 1 || out != "" || !strings.Contains(errOut, "its agents are 1-3") && !strings.Contains(errOut, "has agents 1-3") {
				t.Errorf("status %s: %v, want exit 1 naming the flock's agents and nothing on stdout\nstdout:\n%s\nstderr:\n%s", arg, err, out, errOut)
			}
		}
	})

	for _, tc := range []struct {
		name  string
		drift []string
		agent int    // 0: the whole flock
		want  string // in the agent's drift, or in a drift note
		code  int    // status's exit
	}{
		{"a unit stopped by hand", []string{"systemctl", "stop", "flock-agent@2.service"}, 2, "start unit", statusUnwell},
		{"the flock table flushed", []string{"nft", "delete", "table", "inet", "flock"}, 0, "replace firewall inet flock", statusUnwell},
		{"a credential deleted", []string{"rm", "/var/lib/flock/creds/flock-3.nk"}, 3, "create identity: missing", statusUnwell},
		{"a directory's mode changed", []string{"chmod", "0755", "/srv/flock/agents/1"}, 1, "ensure path: mode", statusUnwell},
		// Without its bus, or the config that says where it listens,
		// status cannot ask it: the flock cannot be read.
		{"the bus stopped", []string{"systemctl", "stop", "flock.service"}, 0, "(re)start bus flock.service: not running", statusUnreachable},
		{"the bus config deleted", []string{"rm", "/etc/flock/bus.json"}, 0, "write bus config /etc/flock/bus.json: missing", statusUnreachable},
		{"the counters socket stopped", []string{"systemctl", "stop", "flock-counters.socket"}, 0, "(re)start counters flock-counters.socket: not running", statusUnwell},
		{"the counters reader's template deleted", []string{"rm", "/etc/systemd/system/flock-counters@.service"}, 0, "install counters flock-counters.socket: unit file missing", statusUnwell},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustRun(t, m, tc.drift...)
			stdout, stderr, code := statusOf(t, m, "--output", "json")
			if code != tc.code {
				t.Errorf("status exits %d, want %d:\n%s%s", code, tc.code, stdout, stderr)
			}
			seen := false
			if tc.agent == 0 {
				seen = strings.Contains(stderr, "drift: "+tc.want)
			} else {
				for _, s := range statusRows(t, stdout) {
					seen = seen || (s.ID == tc.agent && strings.Contains(s.Drift, tc.want))
				}
			}
			if !seen {
				t.Errorf("flockctl status does not show %q:\n%s%s", tc.want, stdout, stderr)
			}
			mustRun(t, m, "flockctl", "provision", "-f", specPath)
			waitActive(t, m, 1, 2, 3)
			waitBus(t, m, time.Now(), 1, 2, 3)
			if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.HasPrefix(out, "nothing to do") {
				t.Errorf("not repaired, a further provision plans:\n%s", out)
			}
			waitWell(t, m)
		})
	}
}

// waitWell waits until flockctl status exits 0: every agent active,
// connected and without drift.
func waitWell(t testing.TB, m *harness.Machine) {
	t.Helper()
	m.Eventually(t, 30*time.Second, func() error {
		out, errOut, code := statusOf(t, m)
		if code != statusWell {
			return fmt.Errorf("flockctl status exits %d:\n%s%s", code, out, errOut)
		}
		return nil
	})
}

// An agent's argv reaches it as written ($VAR and %specifiers literal),
// and a daemon-reload (any package install does one) leaves every agent
// running: systemd 252 could not read back the ExecStartEx it wrote for
// a transient unit, and a reload left agents without a command.
func TestDaemonReloadKeepsAgents(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, `agents:
  - id: 1
    exec: ["/bin/sh", "-c", "printf '%s|%s' \"$1\" \"$2\" > \"$HOME/args\"; exec sleep infinity", "sh", "$HOME", "%i ${X}"]
  - id: 2
    command: ["/usr/bin/tr", "a-z", "A-Z"]
`)
	waitActive(t, m, 1, 2)
	// The agent's shell creates the file, then writes it: read until it
	// holds a line (a file read between the two is empty).
	var args []byte
	m.Eventually(t, 10*time.Second, func() (err error) {
		if args, err = m.ReadFile("/srv/flock/agents/1/args"); err == nil && !strings.Contains(string(args), "|") {
			err = fmt.Errorf("agent 1's args file is %q so far", args)
		}
		return err
	})
	if got := string(args); got != "$HOME|%i ${X}" {
		t.Errorf("agent 1 received %q, want the spec's arguments as written", got)
	}
	pids := map[int]string{}
	for _, id := range []int{1, 2} {
		pids[id] = unitProp(t, m, id, "MainPID")
	}
	mustRun(t, m, "systemctl", "daemon-reload")
	waitActive(t, m, 1, 2)
	for _, id := range []int{1, 2} {
		if got := unitProp(t, m, id, "MainPID"); got != pids[id] {
			t.Errorf("agent %d: MainPID %s after daemon-reload, was %s", id, got, pids[id])
		}
		if st := unitProp(t, m, id, "ExecStart"); !strings.Contains(st, "flock-agent") {
			t.Errorf("agent %d lost its command in the reload: ExecStart=%q", id, st)
		}
	}
	if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.HasPrefix(out, "nothing to do") {
		t.Errorf("after a daemon-reload provision plans:\n%s", out)
	}
	// And the agents still stop and start with their arguments as written:
	// restart agent 1 through systemd, which now runs the command it read
	// back from the transient unit's file. (Type=exec: "active" alone is
	// seen before a mangled command fails, so the args file is the proof.)
	mustRun(t, m, "rm", "/srv/flock/agents/1/args")
	mustRun(t, m, "systemctl", "restart", "flock-agent@1.service")
	m.Eventually(t, 10*time.Second, func() (err error) {
		args, err = m.ReadFile("/srv/flock/agents/1/args")
		return err
	})
	if got := string(args); got != "$HOME|%i ${X}" {
		t.Errorf("after a daemon-reload and a restart agent 1 received %q, want the spec's arguments as written", got)
	}
	waitActive(t, m, 1, 2)
	if n := unitProp(t, m, 1, "NRestarts"); n != "0" {
		t.Errorf("agent 1 restarted %s times after the reload", n)
	}
	if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "after a reload")); out != "AFTER A RELOAD" {
		t.Errorf("flockctl send after a daemon-reload: %q", out)
	}
}
