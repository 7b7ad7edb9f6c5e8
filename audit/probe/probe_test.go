package probe

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

func TestBatchRoundTrip(t *testing.T) {
	b := Batch{Requests: []Request{{Op: "read-file", Path: "/x"}, {Op: "nats-pub", Name: "agent.2.heartbeat", Argv: []string{"a", "$b;"}},
		{Op: "secret-elsewhere", Addr: "api.github.com:443", Send: &Send{Host: "flock-audit.invalid", Path: "/flock-audit", Var: "GH_TOKEN", Inject: spec.Inject{BasicUser: "x-access-token"}}},
		{Op: "model-burst", Addr: "http://127.0.0.1:4230/anthropic", Size: 64, Count: 2, Tries: 10}}}
	got, err := Decode(b.Encode(), false)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("requests: %+v, %v; want %+v", got, err, b)
	}
	b.Results = []Result{{OK: true, Detail: "d", ElapsedMS: 1.5}, {Err: "EPERM"}, {Err: "421 Misdirected Request", TimedOut: true}, {OK: true}}
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
	rs := RunAll([]Request{{Op: "pid"}, {Op: "nope"}, {Op: "stat", Path: "/"}}, Timeout)
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

// A hang is reported as one, within the bound the caller chose, and is
// not mistaken for a refusal.
func TestRunMarksAHang(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accepts and never answers
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r := Run(Request{Op: "nats-anon", Addr: "nats://" + l.Addr().String()}, 300*time.Millisecond)
	if r.OK || !r.TimedOut {
		t.Errorf("a server that never answers: %+v, want timed out", r)
	}
	if r := Run(Request{Op: "stat", Path: "/nonexistent-flock"}, time.Second); r.OK || r.TimedOut {
		t.Errorf("a refusal: %+v, want failed, not timed out", r)
	}
}
