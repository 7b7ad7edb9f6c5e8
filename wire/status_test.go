package wire

import (
	"encoding/json"
	"maps"
	"testing"
)

// TestAgentOnBusJSON: what the bus encodes flockctl decodes, and the
// total keeps the key a bus or flockctl of the version before reads
// ("violations", a number).
//
// Tier: unit (no root).
func TestAgentOnBusJSON(t *testing.T) {
	in := AgentOnBus{Connections: 1, ViolationsTotal: 4, Violations: map[string]uint64{ViolationPublish: 3, ViolationMalformed: 1}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"connections":1,"violations":4,"violations_by_kind":{"malformed":1,"publish":3}}`
	if string(data) != want {
		t.Errorf("encoded %s, want %s", data, want)
	}
	var out AgentOnBus
	if err := json.Unmarshal(data, &out); err != nil || out.ViolationsTotal != 4 || !maps.Equal(out.Violations, in.Violations) {
		t.Errorf("decoded %+v (%v), want %+v", out, err, in)
	}
	var old struct {
		Violations uint64 `json:"violations"`
	}
	if err := json.Unmarshal(data, &old); err != nil || old.Violations != 4 {
		t.Errorf("the previous version reads %+v (%v), want violations 4", old, err)
	}
	if err := json.Unmarshal([]byte(`{"connections":1,"violations":2}`), &out); err != nil || out.ViolationsTotal != 2 {
		t.Errorf("a previous bus's status decodes to %+v (%v)", out, err)
	}
}

// TestViolationKindsAreDistinct: a kind is a JSON key and a log word.
//
// Tier: unit (no root).
func TestViolationKindsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range ViolationKinds {
		if k == "" || seen[k] {
			t.Errorf("kind %q empty or twice", k)
		}
		seen[k] = true
	}
}
