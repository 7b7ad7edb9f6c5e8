package bus

// Tier: unit (no root): a real nats-server in-process, real nats.go
// clients over TCP.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// sharedFlock is testFlock with every agent's share of connections n.
func sharedFlock(n int) *spec.Flock {
	f := testFlock()
	for i := range f.Agents {
		f.Agents[i].Shares.Connections = n
	}
	return f
}

// An agent at its share of connections is refused the next one at once,
// the refusal is counted, and no one else notices: another agent and the
// operator connect, and the agent's own connections carry on.
func TestConnectionShare(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(sharedFlock(3), ids.keys()), Options{})
	var held []*client
	for range 3 {
		held = append(held, connect(t, s, ids, "flock-2"))
	}
	_, err := dial(s, ids, "flock-2")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("a 4th connection of agent 2: %v, want it refused", err)
	}
	if n := s.Status().Agents[2].Violations[wire.ViolationConnections]; n != 1 {
		t.Errorf("agent 2's connections violations: %d, want 1", n)
	}
	for _, name := range []string{"flock-1", "flock-3", creds.OperatorName, creds.OperatorName, creds.OperatorName, creds.OperatorName} {
		connect(t, s, ids, name)
	}
	if err := held[0].Publish(wire.Heartbeat(2), []byte("{}")); err != nil || held[0].Flush() != nil {
		t.Errorf("agent 2's own connection after the refusal: %v", err)
	}
	if n := s.Status().Agents[2].Connections; n != 3 {
		t.Errorf("agent 2 holds %d connections, want 3", n)
	}

	// A closed connection frees its place at once.
	held[1].Close()
	waitFor(t, "the server to see the close", func() bool { return s.Status().Agents[2].Connections == 2 })
	connect(t, s, ids, "flock-2")
	if n := s.Status().Agents[2].Violations[wire.ViolationConnections]; n != 1 {
		t.Errorf("agent 2's violations after a connection within its share: %d, want still 1", n)
	}
}

// A client that reconnects while the server still holds its old
// connection (nats.go's reconnect after a stale connection, a restarted
// program before the server read the old socket's end) is let in under
// the default share, and the old connection is not counted once gone.
func TestConnectionShareAllowsAReconnect(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(sharedFlock(spec.DefaultConnections), ids.keys()), Options{})
	// flock-agent's connection and its program's, each with an old one
	// the server has not noticed gone: raw sockets that stay open.
	for range 2 {
		connect(t, s, ids, "flock-2")
		raw := rawConnect(t, s, ids["flock-2"])
		defer raw.Close()
	}
	for range 2 {
		connect(t, s, ids, "flock-2")
	}
	if n := s.Status().Agents[2].Connections; n != 6 {
		t.Fatalf("agent 2 holds %d connections, want 6", n)
	}
	if n := s.Status().Agents[2].ViolationsTotal; n != 0 {
		t.Errorf("violations %d, want none", n)
	}
}

// rawConnect is a client that authenticates and then just holds its
// socket, as a client that went away without its socket closing does.
func rawConnect(t *testing.T, s *Server, kp nkeys.KeyPair) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Nonce string }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	sig, _ := kp.Sign([]byte(info.Nonce))
	pub, _ := kp.PublicKey()
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"nkey\":%q,\"sig\":%q,\"protocol\":1}\r\nPING\r\n", pub, base64.RawURLEncoding.EncodeToString(sig))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "PONG") {
		t.Fatalf("raw connection: %q, %v", l, err)
	}
	c.SetReadDeadline(time.Time{})
	return c
}

// The gate checks signatures as nats-server does: a key it does not know,
// a signature by another key, or none, is refused (and counts against no
// one's share).
func TestGateChecksTheSignature(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyone, "stranger")...)
	s := startBus(t, ForFlock(sharedFlock(1), ids.keys("stranger")), Options{})
	if _, err := dial(s, ids, "stranger"); err == nil {
		t.Error("an unknown key was let in")
	}
	pub2, _ := ids["flock-2"].PublicKey()
	forged, err := nats.Connect(s.ClientURL(), nats.Nkey(pub2, ids["stranger"].Sign), nats.NoReconnect())
	if err == nil {
		forged.Close()
		t.Error("agent 2's key signed by another was let in")
	}
	connect(t, s, ids, "flock-2") // its one connection: the refusals took none
	if n := s.Status().Agents[2].Violations[wire.ViolationConnections]; n != 0 {
		t.Errorf("refused forgeries counted against agent 2: %d", n)
	}
}

// A reload keeps the connections of a user that stays as it is, applies a
// new share to new connections, and closes those of a user removed or
// whose permissions changed (its client reconnects under the new ones).
func TestGateReload(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	f := sharedFlock(2)
	s := startBus(t, ForFlock(f, ids.keys()), Options{})
	c1 := connect(t, s, ids, "flock-1")
	c2 := connect(t, s, ids, "flock-2")
	c3 := connect(t, s, ids, "flock-3")

	f.Agents[0].Shares.Connections = 1                                         // agent 1: a smaller share
	f.Agents[1].Subjects.Publish = append(f.Agents[1].Subjects.Publish, "x.>") // agent 2: new grants
	if err := s.Reload(ForFlock(f, ids.keys("flock-3"))); err != nil {         // agent 3: removed
		t.Fatal(err)
	}
	waitFor(t, "agents 2 and 3 disconnected", func() bool { return c2.IsClosed() && c3.IsClosed() })
	if c1.IsClosed() || c1.Flush() != nil {
		t.Error("agent 1's connection did not survive the reload")
	}
	if _, err := dial(s, ids, "flock-1"); err == nil {
		t.Error("agent 1 got a 2nd connection beyond its new share of 1")
	}
	if _, err := dial(s, ids, "flock-3"); err == nil {
		t.Error("removed agent 3 connected")
	}
	c2 = connect(t, s, ids, "flock-2")
	if err := c2.Publish("x.y", nil); err != nil || c2.Flush() != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if len(c2.errors()) > 0 {
		t.Errorf("agent 2 under its new grants: %v", c2.errors())
	}
}
