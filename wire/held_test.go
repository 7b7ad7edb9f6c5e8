package wire

import (
	"reflect"
	"testing"
	"time"
)

// Tier: unit. The desk's held tasks are encoded and decoded by the same code.
func TestHeldRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 20, 0, 0, 123, time.UTC)
	for _, h := range []HeldTasks{
		{Tasks: []Held{}},
		{Tasks: []Held{{Seq: 7, ID: "t-1", Agent: 2, Delivery: 3, DeliveredAt: at}, {Seq: 9, ID: "t-2", Agent: 4, Delivery: 1, DeliveredAt: at}}},
	} {
		data, err := EncodeHeld(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHeld(data)
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Errorf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
	if _, err := ParseHeld([]byte("nope")); err == nil {
		t.Error("ParseHeld read garbage")
	}
	if got := (HeldTasks{Tasks: []Held{{Seq: 7, Agent: 2}}}).BySeq()[7].Agent; got != 2 {
		t.Errorf("BySeq: agent %d", got)
	}
}

// Tier: unit. An answer on agent 2's leases that names another agent's
// task is refused whole; one of its own is read back.
func TestHeldBy(t *testing.T) {
	mine, _ := EncodeHeld(HeldTasks{Tasks: []Held{{Seq: 7, ID: "t-1", Agent: 2}}})
	if got, err := HeldBy(2, mine); err != nil || len(got) != 1 || got[0].ID != "t-1" {
		t.Errorf("HeldBy(2, its own task): %+v, %v", got, err)
	}
	mixed, _ := EncodeHeld(HeldTasks{Tasks: []Held{{Seq: 7, ID: "t-1", Agent: 2}, {Seq: 8, ID: "t-2", Agent: 3}}})
	if got, err := HeldBy(2, mixed); err == nil {
		t.Errorf("HeldBy(2, a task of agent 3 among them): %+v, want an error", got)
	}
}
