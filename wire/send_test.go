package wire

// Tier: unit.

import (
	"reflect"
	"testing"
)

// The request a client sends is what the desk reads, and the desk's
// answer what the client reads.
func TestSendRoundTrip(t *testing.T) {
	h, body := SendMessage("tasks.agent.3", "t-1", []byte("payload"))
	h["Colour"] = []string{"blue"}
	subject, keep, err := ParseSend(h)
	if err != nil || subject != "tasks.agent.3" || string(body) != "payload" {
		t.Fatalf("ParseSend: %q, %v", subject, err)
	}
	want := map[string][]string{TaskIDHeader: {"t-1"}, MsgIDHeader: {"t-1"}, "Colour": {"blue"}}
	if !reflect.DeepEqual(keep, want) {
		t.Errorf("kept %v, want %v", keep, want)
	}
	data, err := EncodeSent(Sent{Stream: TasksStream, Seq: 7, Duplicate: true})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ParseSent(data); err != nil || s != (Sent{TasksStream, 7, true}) {
		t.Errorf("ParseSent: %+v, %v", s, err)
	}
	if id, verb, ok := DeskRequest(Desk(4, DeskSend)); !ok || id != 4 || verb != DeskSend {
		t.Errorf("DeskRequest(send): %d %s %v", id, verb, ok)
	}
}

// Only the desk sets the sender, and JetStream's headers (a rollup, an
// expected stream) never reach the stream from a sender; a task id is its
// deduplication id unless one is given.
func TestParseSendKeepsOnlyTheSendersOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    map[string][]string
		keep map[string][]string
		bad  bool
	}{
		{"no subject", map[string][]string{}, nil, true},
		{"a wildcard", map[string][]string{TaskSubjectHeader: {"tasks.*"}}, nil, true},
		{"not a task", map[string][]string{TaskSubjectHeader: {"task.result"}}, nil, true},
		{"bare", map[string][]string{TaskSubjectHeader: {"tasks.worker"}}, map[string][]string{}, false},
		{"forged and JetStream's", map[string][]string{TaskSubjectHeader: {"tasks.worker"}, SenderHeader: {"9"}, "Nats-Rollup": {"all"},
			"nats-expected-stream": {"X"}, LeaseHeader: {"l"}}, map[string][]string{}, false},
		{"its own dedup id wins", map[string][]string{TaskSubjectHeader: {"tasks.worker"}, TaskIDHeader: {"a"}, "nats-msg-id": {"b"}},
			map[string][]string{TaskIDHeader: {"a"}, MsgIDHeader: {"b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, keep, err := ParseSend(tc.h)
			if (err != nil) != tc.bad || (!tc.bad && !reflect.DeepEqual(keep, tc.keep)) {
				t.Errorf("kept %v, %v", keep, err)
			}
		})
	}
}
