package operator

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// plainServer is a nats-server without users or JetStream, shut down
// when the test ends: the gathering needs nothing of flock's bus.
func plainServer(t *testing.T) *server.Server {
	t.Helper()
	return serverWith(t, server.Options{})
}

// serverWith is a nats-server on a free port of 127.0.0.1 with o's other
// options, shut down when the test ends.
func serverWith(t *testing.T, o server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.NoSigs = "127.0.0.1", -1, true
	ns, err := server.NewServer(&o)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func plainConn(t *testing.T, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// respond answers wire.UnitsSubject on its own connection as a bus would
// (data nil: subscribed, never answers).
func respond(t *testing.T, ns *server.Server, data []byte) {
	t.Helper()
	nc := plainConn(t, ns)
	if _, err := nc.Subscribe(wire.UnitsSubject, func(m *nats.Msg) {
		if data != nil {
			_ = m.Respond(data)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestGatherUnits: the answers of hosts a and b come back, silent c is
// missing once the wait is over, another flock's host and a garbled
// answer are left out; with every host answering the gathering ends at
// once; with no bus at all it says so at once.
//
// Tier: unit (no root).
func TestGatherUnits(t *testing.T) {
	ns := plainServer(t)
	enc := func(u wire.HostUnits) []byte {
		data, err := wire.EncodeUnits(u)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	respond(t, ns, enc(wire.HostUnits{Host: "a", Agents: map[int]wire.AgentUnit{1: {Unit: "flock-agent@1.service", ActiveState: "active"}}}))
	respond(t, ns, enc(wire.HostUnits{Host: "b", Agents: map[int]wire.AgentUnit{2: {ActiveState: "failed"}, 3: {}}}))
	respond(t, ns, nil) // c: subscribed, silent
	respond(t, ns, enc(wire.HostUnits{Host: "z"}))
	respond(t, ns, []byte("garbled"))
	op := plainConn(t, ns)
	ctx := context.Background()

	const wait = 300 * time.Millisecond
	start := time.Now()
	got, err := GatherUnits(ctx, op, []string{"a", "b", "c"}, wait)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	hosts := slices.Sorted(maps.Keys(got))
	if !slices.Equal(hosts, []string{"a", "b"}) || got["b"].Agents[2].ActiveState != "failed" || got["a"].Agents[1].Unit != "flock-agent@1.service" {
		t.Errorf("gathered %+v, want a's and b's answers", got)
	}
	if took < wait {
		t.Errorf("returned after %s, before the wait of %s for silent c", took, wait)
	}

	start = time.Now()
	got, err = GatherUnits(ctx, op, []string{"a", "b"}, time.Minute)
	if err != nil || len(got) != 2 {
		t.Errorf("a and b: %+v, %v", got, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("every host answered, yet it waited %s", took)
	}

	lonely := plainConn(t, plainServer(t))
	start = time.Now()
	got, err = GatherUnits(ctx, lonely, []string{"a"}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "no bus answers "+wire.UnitsSubject) || len(got) != 0 {
		t.Errorf("no bus: %+v, %v", got, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("no bus, yet it waited %s", took)
	}
}

// Tier: unit. A running task this host's desk does not hold is named
// after the worker another host's desk handed it to; one held here, a
// pending one and one nobody holds keep what they have.
func TestAddHolders(t *testing.T) {
	entries := []TaskEntry{
		{ID: "t-1", State: Running, seq: 1, Holder: 2},
		{ID: "t-2", State: Running, seq: 2},
		{ID: "t-3", State: Running, seq: 3},
		{ID: "t-4", State: Pending, seq: 4},
		{ID: "t-5", State: Done},
	}
	AddHolders(entries, map[string]wire.HostUnits{
		"b": {Host: "b", Held: []wire.Held{{Seq: 2, ID: "t-2", Agent: 5}, {Seq: 4, ID: "t-4", Agent: 6}}},
		"c": {Host: "c"},
	})
	var got []int
	for _, e := range entries {
		got = append(got, e.Holder)
	}
	if !slices.Equal(got, []int{2, 5, 0, 0, 0}) {
		t.Errorf("holders %v, want [2 5 0 0 0]", got)
	}
}
