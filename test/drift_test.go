package test

// Tier: root + nspawn. Drift made by hand on a running flock: flockctl
// status names it (on the agent's row, or as a note for the whole flock),
// and the next provision repairs exactly it.

import (
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

	for _, tc := range []struct {
		name  string
		drift []string
		agent int    // 0: the whole flock
		want  string // in the agent's drift, or in a drift note
	}{
		{"a unit stopped by hand", []string{"systemctl", "stop", "flock-agent@2.service"}, 2, "start unit"},
		{"the flock table flushed", []string{"nft", "delete", "table", "inet", "flock"}, 0, "replace firewall inet flock"},
		{"a credential deleted", []string{"rm", "/var/lib/flock/creds/flock-3.nk"}, 3, "create identity: missing"},
		{"a directory's mode changed", []string{"chmod", "0755", "/srv/flock/agents/1"}, 1, "ensure path: mode"},
		{"the bus stopped", []string{"systemctl", "stop", "flock.service"}, 0, "(re)start bus flock.service: not running"},
		{"the bus config deleted", []string{"rm", "/etc/flock/bus.json"}, 0, "write bus config /etc/flock/bus.json: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustRun(t, m, tc.drift...)
			stdout, stderr, err := run(t, m, "flockctl", "status", "--output", "json")
			if err != nil {
				t.Fatalf("status: %v\n%s", err, stderr)
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
		})
	}
}
