package wire

// Tier: unit. What the worker and the bus store on ResultSubject is what
// flockctl and the bus read back.

import (
	"strings"
	"testing"
)

func TestResultMessageRoundTrip(t *testing.T) {
	for _, r := range []Result{
		{TaskID: "t-1", Agent: 3, OK: true, Output: "HELLO\n", DurationMS: 12.5},
		{TaskID: "t 2/ü", Agent: 4, ExitStatus: -1, Stderr: "boom", Truncated: true, Error: "timed out after 5s"},
		{TaskID: "seq-7", ExitStatus: -1, Error: "dead-lettered after 3 deliveries"},
	} {
		h, body, err := ResultMessage(r.TaskID, "tasks.worker", r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseResult(h, body)
		if err != nil || got != r {
			t.Errorf("%+v read back as %+v, %v", r, got, err)
		}
		if TaskID(h, 99) != r.TaskID || header(h, TaskSubjectHeader) != "tasks.worker" || header(h, MsgIDHeader) != ResultMsgID(r.TaskID) {
			t.Errorf("headers %v", h)
		}
	}
}

func TestParseResultTakesTheIDFromTheHeaders(t *testing.T) {
	r, err := ParseResult(map[string][]string{TaskIDHeader: {"t-9"}}, []byte(`{"ok":true}`))
	if err != nil || r.TaskID != "t-9" || !r.OK {
		t.Errorf("%+v, %v", r, err)
	}
	if _, err := ParseResult(nil, []byte("not json")); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("bad body: %v", err)
	}
}
