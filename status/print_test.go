package status

import (
	"strings"
	"testing"

	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// Tier: unit. Below the status table: a diagnosed agent with its wall and
// fix, a restart loop no wall explains, and nothing for a healthy agent.
func TestPrintDiagnoses(t *testing.T) {
	var b strings.Builder
	WriteDiagnoses(&b, []Agent{
		{ID: 2, Restarts: 4, LastExit: "killed by SIGTRAP", Diagnosis: &units.Diagnosis{Wall: "MemoryDenyWriteExecute", Why: "it died", Fix: "set jit: true on agent 2"}},
		{ID: 3, Restarts: 7, LastExit: "exited 2"},
		{ID: 4, Restarts: 1, LastExit: "exited 0"},
		{ID: 5},
	})
	want := "agent 2 keeps dying (4 restarts, last killed by SIGTRAP). Likely wall: MemoryDenyWriteExecute: it died.\n  fix: set jit: true on agent 2\n" +
		"agent 3 keeps dying (7 restarts, last exited 2); no wall explains it: flockctl logs 3\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Tier: unit. Below the table: each agent with violations, by kind in
// wire order, a kind this flockctl does not know last.
func TestPrintViolations(t *testing.T) {
	var b strings.Builder
	printViolations(&b, []Agent{
		{ID: 1, Violations: 10004, ViolationsByKind: map[string]uint64{"malformed": 10000, "publish": 3, "flood": 1}},
		{ID: 2},
		{ID: 3, Violations: 2, ViolationsByKind: map[string]uint64{"subscribe": 1, "newer-kind": 1}},
	})
	want := "violations: agent 1: 3 publish, 1 flood, 10000 malformed\n" +
		"violations: agent 3: 1 subscribe, 1 newer-kind\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Tier: unit. Below the table: each agent with refused packets, with how
// many were logged; none for an agent with none.
func TestPrintRefused(t *testing.T) {
	var b strings.Builder
	printRefused(&b, []Agent{
		{ID: 1, RefusedPackets: 1000, RefusedLogged: 5},
		{ID: 2},
		{ID: 3, RefusedPackets: 1, RefusedLogged: 1},
	})
	want := "refused: agent 1: 1000 packets denied by the firewall, 5 logged (995 over its log limit)\n" +
		"refused: agent 3: 1 packets denied by the firewall, 1 logged (0 over its log limit)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Tier: unit. Below the table: the agents with names in their egress when
// flock-proxy.service is down, and nothing when it runs or no agent has
// a name.
func TestPrintProxyDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []Agent
		want string
	}{
		{"down", []Agent{{ID: 1, Proxy: "failed"}, {ID: 2}, {ID: 4, Proxy: "failed"}},
			"note: flock-proxy.service is failed: agents 1, 4 cannot reach the names in their egress (journalctl -u flock-proxy.service; flockctl provision starts it)\n"},
		{"running", []Agent{{ID: 1, Proxy: "active"}, {ID: 2}}, ""},
		{"no names", []Agent{{ID: 1}, {ID: 2}}, ""},
	} {
		var b strings.Builder
		printProxyDown(&b, tc.rows)
		if b.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

// Tier: unit. Below the table: a bus that syncs at an interval, or one
// from before bus.sync, may lose acknowledged tasks to a power cut, and
// says so; one that syncs always, or did not answer, says nothing.
func TestPrintSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *wire.BusStatus
		want string
	}{
		{"always", &wire.BusStatus{Sync: "always"}, ""},
		{"no answer", nil, ""},
		{"an interval", &wire.BusStatus{Sync: "1s"}, "note: the bus syncs every 1s (bus.sync): a power cut loses what it stored in the last 1s\n"},
		{"a bus from before bus.sync", &wire.BusStatus{}, "note: the bus syncs every 2m (it started before bus.sync): a power cut loses what it stored since; flockctl provision restarts it to sync always\n"},
	} {
		var b strings.Builder
		printSync(&b, tc.st)
		if b.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

// Tier: unit. Below the table: each part of the store the bus did not
// find proven at its start, what it put back and where the damaged files
// are; nothing when the store proved itself.
func TestPrintStore(t *testing.T) {
	var b strings.Builder
	printStore(&b, &wire.BusStatus{Store: []wire.StoreProblem{
		{Stream: "TASKS", File: "jetstream/$G/streams/TASKS/msgs/1.blk", What: "196 bytes from byte 588 fail their checksums (1 damaged spans)",
			PutBack: 16, LostBytes: 196, Aside: "/var/lib/flock-bus/damaged/20261127T080000.000Z"},
		{Stream: "*", What: "the store was set aside (flockctl store quarantine)", Aside: "/var/lib/flock-bus/damaged/20261127T090000.000Z"},
	}})
	printStore(&b, &wire.BusStatus{})
	printStore(&b, nil)
	want := "store: TASKS, jetstream/$G/streams/TASKS/msgs/1.blk: 196 bytes from byte 588 fail their checksums (1 damaged spans); 16 messages that proved themselves put back; kept in /var/lib/flock-bus/damaged/20261127T080000.000Z (flockctl store check)\n" +
		"store: *: the store was set aside (flockctl store quarantine); kept in /var/lib/flock-bus/damaged/20261127T090000.000Z (flockctl store check)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
