package transcript

import "testing"

// Tier: unit (it needs nothing; it runs with the system tests under
// test/). What a transcript keeps of a run, and what it replaces.
func TestNormalize(t *testing.T) {
	tr := &Transcript{rules: append(append([]Rule(nil), volatile...), R(`\(\d+ restarts`, "(<n> restarts"))}
	for _, tc := range []struct{ in, want string }{
		{"2026-11-27 08:04:25.983  agent 1    started", "<time>  agent 1    started"},
		{`{"time":"2026-11-27T08:04:27.998165Z"}`, `{"time":"<time>"}`},
		{"Active: inactive (dead) since Fri 2026-11-28 00:30:01 UTC; 5s ago", "Active: inactive (dead) since <time> UTC; <age> ago"},
		{"Nov 28 00:12:33 flock-7410-2 node[412]: ready", "<time> flock-7410-2 node[<pid>]: ready"},
		{"kept in /var/lib/flock-bus/damaged/20261128T002353.215Z (flockctl store check)", "kept in /var/lib/flock-bus/damaged/<time> (flockctl store check)"},
		{"connected     1m2s ago     0", "connected     <age> ago     0"},
		{"resets at 2026-11-28T00:00:00Z (in 1h42m7s)", "resets at <time> (in <duration>)"},
		{`127.0.0.1:38524 - cid:33 - "v1.55.0:go:probe"`, `127.0.0.1:<port> - cid:<n> - "v1.55.0:go:probe"`},
		{`users:(("probe",pid=1234,fd=7))`, `users:(("probe",pid=<pid>,fd=<fd>))`},
		{"user flock-1, nkey UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF6", "user flock-1, nkey <nkey>"},
		{"flockctl: task 8qvx1SqZu2amkIS1Uv7XjS failed on agent 8", "flockctl: task <id> failed on agent 8"},
		{"agent 2 keeps dying (17 restarts, last killed by SIGTRAP)", "agent 2 keeps dying (<n> restarts, last killed by SIGTRAP)"},
		// What a run of the same test sees again stays.
		{"refused: agent 1: 1 packets denied by the firewall, 1 logged", "refused: agent 1: 1 packets denied by the firewall, 1 logged"},
		{"flock_agent_wall_killed{agent=\"2\",wall=\"MemoryDenyWriteExecute\"} 1", "flock_agent_wall_killed{agent=\"2\",wall=\"MemoryDenyWriteExecute\"} 1"},
	} {
		if got := tr.normalize(tc.in); got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Spaces that align columns do not matter; anything else does.
func TestSame(t *testing.T) {
	a := "ID  STATE     HEARTBEAT\n1   active    <age> ago\n"
	for _, tc := range []struct {
		b    string
		same bool
	}{
		{"ID  STATE     HEARTBEAT\n1   active    <age> ago\n", true},
		{"ID  STATE   HEARTBEAT\n1   active  <age> ago  \n", true},
		{"ID  STATE     HEARTBEAT\n1   failed    <age> ago\n", false},
		{"ID  STATE     HEARTBEAT\n", false},
	} {
		if got := Same(a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", a, tc.b, got, tc.same)
		}
	}
}
