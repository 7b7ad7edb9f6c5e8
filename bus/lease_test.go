package bus

// Tier: unit (the seeds; go test -fuzz FuzzLease ./bus for more). A lease
// comes back from the agent: hostile input.

import (
	"strings"
	"testing"

	"github.com/flockrun/flock/wire"
)

func FuzzLease(f *testing.F) {
	key := make([]byte, leaseKeySize)
	ack := "$JS.ACK.TASKS.worker.1.7.7.1795720997584496639.0"
	f.Add(makeLease(key, 2, ack), 2)
	f.Add(makeLease(key, 2, ack), 3)
	f.Add("bm90.aGVsbG8", 2)
	f.Add("", 0)
	f.Add("...", -1)
	f.Fuzz(func(t *testing.T, lease string, agent int) {
		got, malformed, err := openLease(key, agent, lease)
		if err == nil {
			// Accepted only what the desk made, for this agent.
			if malformed || makeLease(key, agent, got) != canonical(lease) {
				t.Fatalf("accepted %q for agent %d as %q", lease, agent, got)
			}
			_, _ = parseAck(got)
		}
		_, _, _ = wire.DeskRequest(lease)
		_, _ = wire.ParseNextRequest([]byte(lease))
	})
}

// canonical is lease as makeLease writes it (base64url without padding
// has one spelling per value, but a decoder may accept others).
func canonical(lease string) string { return strings.TrimRight(lease, "=") }

func TestParseAck(t *testing.T) {
	for _, tc := range []struct {
		ack  string
		want delivery
		ok   bool
	}{
		{"$JS.ACK.TASKS.worker.3.17.20.1795720997584496639.0", delivery{"worker", 3, 17}, true},
		{"$JS.ACK.hub.ACCHASH.TASKS.agent-2.1.5.9.1795720997584496639.0.tok", delivery{"agent-2", 1, 5}, true},
		{"$JS.ACK.DEAD.worker.3.17.20.1795720997584496639.0", delivery{}, false},
		{"$JS.ACK.TASKS.worker.x.17.20.1795720997584496639.0", delivery{}, false},
		{"agent.2.task.result", delivery{}, false},
	} {
		got, err := parseAck(tc.ack)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v", tc.ack, got, err)
		}
	}
}
