package probe

import (
	"reflect"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	b := Batch{Requests: []Request{{Op: "read-file", Path: "/x"}, {Op: "nats-pub", Name: "agent.2.heartbeat", Argv: []string{"a", "$b;"}}}}
	got, err := Decode(b.Encode(), false)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("requests: %+v, %v; want %+v", got, err, b)
	}
	b.Results = []Result{{OK: true, Detail: "d", ElapsedMS: 1.5}, {Err: "EPERM"}}
	got, err = Decode(b.Encode(), true)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("answers: %+v, %v; want %+v", got, err, b)
	}
	b.Results = b.Results[:1]
	if _, err := Decode(b.Encode(), true); err == nil {
		t.Error("a short answer decoded")
	}
	if _, err := Decode([]byte("{"), false); err == nil {
		t.Error("bad JSON decoded")
	}
}

func TestRunBatchInOrder(t *testing.T) {
	rs := RunAll([]Request{{Op: "pid"}, {Op: "nope"}, {Op: "stat", Path: "/"}})
	if !rs[0].OK || rs[1].OK || !rs[2].OK {
		t.Errorf("results: %+v", rs)
	}
}

// Hold crosses the boundary with the batch: the colluding peer's unit
// must stay up after answering.
func TestBatchHoldRoundTrip(t *testing.T) {
	got, err := Decode(Batch{Requests: []Request{{Op: "listen-tcp", Addr: ":0"}}, Hold: true}.Encode(), false)
	if err != nil || !got.Hold {
		t.Fatalf("hold: %+v, %v", got, err)
	}
}
