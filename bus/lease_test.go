package bus

// Tier: unit (the seeds; go test -fuzz FuzzLease ./bus for more). A lease
// comes back from the agent: hostile input.

import (
	"bytes"
	"os"
	"path/filepath"
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
	t.Parallel()
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

// TestLeaseKeyFile: the key is made once, 0600, and read back the same;
// a leftover of a start cut short beside it changes nothing; a key of
// the wrong size is refused with the fix.
//
// Tier: unit (no root).
func TestLeaseKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, leaseKeyFile+".new-123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := loadLeaseKey(dir)
	if err != nil || len(key) != leaseKeySize {
		t.Fatalf("a new key: %d bytes, %v", len(key), err)
	}
	st, err := os.Stat(filepath.Join(dir, leaseKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, %v; want mode 0600", st, err)
	}
	if again, err := loadLeaseKey(dir); err != nil || !bytes.Equal(again, key) {
		t.Errorf("read again: %x, %v; want %x", again, err, key)
	}
	if err := os.WriteFile(filepath.Join(dir, leaseKeyFile), key[:5], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadLeaseKey(dir); err == nil || !strings.Contains(err.Error(), "is 5 bytes, not 32: remove it") {
		t.Errorf("a short key: %v", err)
	}
}
