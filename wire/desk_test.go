package wire

// Tier: unit. What the desk says and what workers read are the same code.

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestHandedRoundTrip(t *testing.T) {
	in := Handed{ID: "t-1", Subject: "tasks.worker", Payload: []byte("x\x00y"), Delivery: 3, Lease: "abc.def", AckWait: 30 * time.Second}
	h, body := HandedMessage(in)
	out, ok, err := ParseHanded(h, body)
	if err != nil || !ok || out.ID != in.ID || out.Subject != in.Subject || !bytes.Equal(out.Payload, in.Payload) ||
		out.Delivery != in.Delivery || out.Lease != in.Lease || out.AckWait != in.AckWait {
		t.Errorf("round trip: %+v %v %v", out, ok, err)
	}
	if _, ok, err := ParseHanded(nil, nil); ok || err != nil {
		t.Errorf("an empty answer: %v %v", ok, err)
	}
	_, ok, err = ParseHanded(RefusalMessage(Refusal{Kind: RefusedStale, Reason: "overtaken"}), nil)
	var r *Refusal
	if ok || !errors.As(err, &r) || r.Kind != RefusedStale || r.Reason != "overtaken" {
		t.Errorf("a refusal: %v %v", ok, err)
	}
}

func TestDeskRequest(t *testing.T) {
	for _, tc := range []struct {
		subject string
		id      int
		verb    string
		ok      bool
	}{
		{Desk(7, DeskNext), 7, DeskNext, true},
		{Desk(12, DeskResult), 12, DeskResult, true},
		{"agent.07.task.next", 0, "", false},
		{"agent.7.task.steal", 0, "", false},
		{"agent.7.task.next.x", 0, "", false},
		{"agent.x.task.next", 0, "", false},
	} {
		id, verb, ok := DeskRequest(tc.subject)
		if id != tc.id || verb != tc.verb || ok != tc.ok {
			t.Errorf("%s: %d %q %v", tc.subject, id, verb, ok)
		}
	}
	for _, tc := range []struct {
		body string
		wait time.Duration
		err  bool
	}{
		{"", DefaultNextWait, false},
		{`{"wait_ms":100}`, 100 * time.Millisecond, false},
		{`{"wait_ms":99999999}`, MaxNextWait, false},
		{`{"wait_ms":-1}`, 0, true},
		{`nope`, 0, true},
	} {
		r, err := ParseNextRequest([]byte(tc.body))
		if (err != nil) != tc.err || (err == nil && r.Wait() != tc.wait) {
			t.Errorf("%q: %v %v", tc.body, r.Wait(), err)
		}
	}
}
