package wire

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestNoQuorumRoundTrip: the refusal as nats.go's JetStream client reads
// a publish's answer (an API error) gives back the reason; the server's
// own error of that code is not taken for it. Tier: unit.
func TestNoQuorumRoundTrip(t *testing.T) {
	const why = "host a cannot store tasks now: no leader"
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(NoQuorumReply(why), &resp); err != nil || resp.Error == nil {
		t.Fatalf("%s: %v", NoQuorumReply(why), err)
	}
	if resp.Error.Code != 503 {
		t.Errorf("status %d, want 503", resp.Error.Code)
	}
	if got, ok := ParseNoQuorum(int(resp.Error.ErrorCode), resp.Error.Description); !ok || got != why {
		t.Errorf("ParseNoQuorum: %q %v, want %q", got, ok, why)
	}
	if _, ok := ParseNoQuorum(NoQuorumCode, "JetStream system temporarily unavailable"); ok {
		t.Errorf("the server's own error taken for the bus's refusal")
	}
}
