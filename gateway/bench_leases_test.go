package gateway

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// natsLeases is a worker's leases as flock-proxy asks them, for the
// benches: a request over a real NATS server on loopback to a responder
// that answers from memory, as the task desk does.
type natsLeases struct{ nc *nats.Conn }

func (l natsLeases) Held(agent int) ([]wire.Held, error) {
	m, err := l.nc.Request(wire.LeasesSubject(agent), nil, time.Second)
	if err != nil {
		return nil, err
	}
	return wire.HeldBy(agent, m.Data)
}

// deskOnLoopback starts a NATS server and a responder holding held for
// every agent that asks, and returns the proxy's side of it.
func deskOnLoopback(tb testing.TB, held ...wire.Held) natsLeases {
	tb.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	tb.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	answer, err := wire.EncodeHeld(wire.HeldTasks{Tasks: held})
	if err != nil {
		tb.Fatal(err)
	}
	desk, err := nats.Connect(ns.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(desk.Close)
	if _, err := desk.Subscribe(wire.LeasesSubjects, func(m *nats.Msg) { m.Respond(answer) }); err != nil {
		tb.Fatal(err)
	}
	desk.Flush()
	proxy, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(wire.ProxyInbox))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(proxy.Close)
	return natsLeases{proxy}
}
