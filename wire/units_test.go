package wire

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Tier: unit. A bus's units answer is encoded and decoded by the same
// code.
func TestUnitsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, u := range []HostUnits{
		{Host: "b", Agents: map[int]AgentUnit{}},
		{Host: "c", Agents: map[int]AgentUnit{}, Error: "no D-Bus system bus"},
		{Host: "b", Agents: map[int]AgentUnit{
			2: {Unit: "flock-agent@2.service", ActiveState: "active", SubState: "running", Restarts: 3, ExitCode: "killed", ExitStatus: 9,
				Bus: AgentOnBus{Connections: 1, HeartbeatAt: &at, ViolationsTotal: 2, Violations: map[string]uint64{ViolationPublish: 2}}},
			3: {}, // no unit loaded
		}, Held: []Held{{Seq: 7, ID: "t-1", Agent: 2, Delivery: 1, DeliveredAt: at}}},
	} {
		data, err := EncodeUnits(u)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseUnits(data)
		if err != nil || !reflect.DeepEqual(got, u) {
			t.Errorf("round trip of %+v:\n got %+v, %v\n(%s)", u, got, err, data)
		}
	}
	if data, _ := EncodeUnits(HostUnits{Host: "a"}); string(data) != `{"host":"a","agents":{}}` {
		t.Errorf("no agents encode as %s", data)
	}
	for _, bad := range []string{"nope", `{"agents":[]}`} {
		if _, err := ParseUnits([]byte(bad)); err == nil || !strings.Contains(err.Error(), UnitsSubject) {
			t.Errorf("ParseUnits(%s): %v, want an error naming %s", bad, err, UnitsSubject)
		}
	}
}
