package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// The bus goes away and comes back on the same port: events published
// meanwhile are buffered and all delivered, the agent retries through an
// authorization error (its user not yet known to the new bus) and says
// it is alive at once on reconnect. Tier: unit (no root).
func TestReconnectDeliversBuffered(t *testing.T) {
	au, tu := newUser(t), newUser(t)
	agentUser := &server.NkeyUser{Nkey: au.pub, Permissions: agentPerms(7, "worker")}
	s := startBus(t, -1, agentUser, &server.NkeyUser{Nkey: tu.pub})
	port := busPort(s)
	a, logs := testAgent(t, s, au)
	if err := a.Conn().Flush(); err != nil {
		t.Fatal(err)
	}

	s.Shutdown()
	eventually(t, 5*time.Second, func() error {
		if a.Conn().IsConnected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	for i := range 100 {
		if err := a.Event("buffered", map[string]any{"n": i}); err != nil {
			t.Fatalf("event %d while the bus is down: %v", i, err)
		}
	}

	// The new bus knows only the tester at first, so the tester is
	// listening before the agent can get in.
	opts := func(users ...*server.NkeyUser) *server.Options {
		return &server.Options{Host: "127.0.0.1", Port: port, Nkeys: users, NoLog: true, NoSigs: true}
	}
	tester := &server.NkeyUser{Nkey: tu.pub}
	s2 := startBusOpts(t, opts(tester))
	tc := connectTester(t, s2, tu)
	events, _ := tc.SubscribeSync(wire.Events(7))
	beats, _ := tc.SubscribeSync(wire.Heartbeat(7))
	if err := tc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return logHas(logs, `"msg":"bus refused the agent's credential, retrying"`) })
	if err := s2.ReloadOptions(opts(tester, agentUser)); err != nil {
		t.Fatal(err)
	}

	eventually(t, 15*time.Second, func() error {
		if !a.Conn().IsConnected() {
			return fmt.Errorf("agent not reconnected")
		}
		return nil
	})
	for i := range 100 {
		var ev wire.Event
		next(t, events, &ev)
		if ev.Kind != "buffered" || ev.Data["n"] != float64(i) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	var hb wire.HeartbeatMsg
	next(t, beats, &hb) // no Heartbeats loop runs: this is the reconnect's
	if hb.Agent != 7 || time.Since(hb.Time) > 5*time.Second {
		t.Errorf("heartbeat %+v", hb)
	}
	if err := logHas(logs, `"msg":"bus reconnected"`); err != nil {
		t.Error(err)
	}
}
