package wire

import "testing"

func TestEgressEventRoundTrips(t *testing.T) {
	e := EgressEvent{Agent: 3, Decision: "allow", Reason: "allowed", Name: "api.example.com", Port: 443,
		Addr: "192.0.2.10", BytesUp: 10, BytesDown: 20, DurationMS: 1.5, Suppressed: 4}
	b, err := EncodeEgress(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseEgress(b)
	if err != nil || back != e {
		t.Errorf("round trip: %+v %v, want %+v", back, err, e)
	}
	if _, err := ParseEgress([]byte(`{"agent":1,"decision":"maybe"}`)); err == nil {
		t.Error("a decision that is neither allow nor deny was read")
	}
	if EgressSubject(7) != "flock.egress.7" {
		t.Error(EgressSubject(7))
	}
}
