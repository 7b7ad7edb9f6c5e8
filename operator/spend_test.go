package operator

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// TestAddSpend: a held task whose proxy answers gets its spend, asked
// with its seq and Final false; one whose proxy is silent or absent, or
// answers garbled, keeps none, within the wait; tasks no worker holds
// are not asked.
//
// Tier: unit (a real embedded NATS server, no root).
func TestAddSpend(t *testing.T) {
	ns := plainServer(t)
	proxy := plainConn(t, ns)
	asked := make(chan wire.TaskSpendRequest, 10)
	answer := func(agent int, reply func(*nats.Msg)) {
		if _, err := proxy.Subscribe(wire.TaskSpendSubject(agent), reply); err != nil {
			t.Fatal(err)
		}
	}
	answer(2, func(m *nats.Msg) {
		r, err := wire.ParseTaskSpendRequest(m.Data)
		if err != nil {
			t.Error(err)
		}
		asked <- r
		data, _ := wire.EncodeTaskSpend(wire.TaskSpend{Requests: 3, Tokens: wire.Tokens{InputTokens: 1000}, Cost: wire.USD / 50})
		_ = m.Respond(data)
	})
	answer(3, func(*nats.Msg) {}) // silent
	answer(5, func(m *nats.Msg) { _ = m.Respond([]byte("garbled")) })
	answer(6, func(*nats.Msg) { t.Error("a task no worker holds was asked for") })
	if err := proxy.Flush(); err != nil {
		t.Fatal(err)
	}
	entries := []TaskEntry{
		{ID: "t-1", State: Running, seq: 11, Holder: 2},
		{ID: "t-2", State: Running, seq: 12, Holder: 3},
		{ID: "t-3", State: Running, seq: 13, Holder: 4}, // no proxy listens
		{ID: "t-4", State: Running, seq: 14, Holder: 5},
		{ID: "t-5", State: Running, seq: 15},           // waits to be handed out again
		{ID: "t-6", State: Pending, seq: 16},           // no holder
		{ID: "t-7", State: Done, Agent: 6},             // its result's spend, if any
		{ID: "t-8", State: Running, Holder: 6, seq: 0}, // not from the queue
	}
	const wait = 300 * time.Millisecond
	start := time.Now()
	AddSpend(context.Background(), plainConn(t, ns), entries, wait)
	if took := time.Since(start); took > wait+2*time.Second {
		t.Errorf("took %s, more than the wait of %s", took, wait)
	}
	if s := entries[0].Spend; s == nil || s.Requests != 3 || s.Cost != wire.USD/50 {
		t.Errorf("t-1's spend: %+v, want the proxy's answer", s)
	}
	select {
	case r := <-asked:
		if r != (wire.TaskSpendRequest{Seq: 11}) {
			t.Errorf("asked %+v, want seq 11, not final", r)
		}
	default:
		t.Error("agent 2's proxy was not asked")
	}
	for _, e := range entries[1:] {
		if e.Spend != nil {
			t.Errorf("%s: spend %+v, want none", e.ID, e.Spend)
		}
	}
}
