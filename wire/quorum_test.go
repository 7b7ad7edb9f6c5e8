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
	for _, maybe := range []bool{false, true} {
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(NoQuorumReply(why, maybe), &resp); err != nil || resp.Error == nil {
			t.Fatalf("%s: %v", NoQuorumReply(why, maybe), err)
		}
		if resp.Error.Code != 503 {
			t.Errorf("status %d, want 503", resp.Error.Code)
		}
		if got, gotMaybe, ok := ParseNoQuorum(int(resp.Error.ErrorCode), resp.Error.Description); !ok || got != why || gotMaybe != maybe {
			t.Errorf("ParseNoQuorum: %q %v %v, want %q %v", got, gotMaybe, ok, why, maybe)
		}
	}
	if _, _, ok := ParseNoQuorum(NoQuorumCode, "JetStream system temporarily unavailable"); ok {
		t.Errorf("the server's own error taken for the bus's refusal")
	}
}
