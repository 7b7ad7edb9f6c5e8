package bus

// Tier: unit (no root): a real nats-server in-process, real clients over
// TCP (raw ones where a nats.go client would not misbehave).

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// lockedBuffer is a log the server writes from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A refused connection is one line in the log, the bus's, under the
// agent's name and kind; the server's own anonymous line about it is left
// out, so a flood of them does not fill the unauthenticated clients'
// window.
func TestConnectionRefusalsAreLoggedOnce(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	var log lockedBuffer
	s := startBus(t, ForFlock(sharedFlock(1), ids.keys()), Options{Log: &log})
	connect(t, s, ids, "flock-2")
	for range 5 {
		if _, err := dial(s, ids, "flock-2"); err == nil {
			t.Fatal("a 2nd connection of agent 2 was let in")
		}
	}
	if n := s.Status().Agents[2].Violations[wire.ViolationConnections]; n != 5 {
		t.Errorf("agent 2's connections violations: %d, want 5", n)
	}
	time.Sleep(100 * time.Millisecond) // the server logs its line after the refusal
	out := log.String()
	if got := strings.Count(out, "flock-2 (agent 2): connections violation: a connection refused: it holds 1, its share (shares.connections) is 1"); got != 1 {
		t.Errorf("%d lines of agent 2's refusal, want 1 (the rest held back for the minute):\n%s", got, out)
	}
	if strings.Contains(out, authError) {
		t.Errorf("the server's own line about a refusal is in the log:\n%s", out)
	}
	// A stranger's refusal is still the server's to log.
	ids2 := newIdentities(t, "stranger")
	if _, err := dial(s, ids2, "stranger"); err == nil {
		t.Fatal("a stranger was let in")
	}
	waitFor(t, "the stranger's line", func() bool { return strings.Contains(log.String(), authError) })
}

// A connection's subscriptions are bounded: the one beyond is refused
// with the server's error, counted for its agent, and every other
// subscription of every agent goes on.
func TestSubscriptionBound(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	c := ForFlock(testFlock(), ids.keys())
	c.MaxSubscriptions = spec.MinMaxSubscriptions
	s := startBus(t, c, Options{})
	orch := connect(t, s, ids, "flock-1")
	bystander := record(t, orch, wire.AllEvents)
	mon := connect(t, s, ids, "flock-3")
	for i := range spec.MinMaxSubscriptions {
		if _, err := mon.Subscribe(fmt.Sprintf("agent.%d.events", i+1), func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	mon.Flush()
	if _, err := mon.Subscribe("agent.99.events", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	mon.Flush()
	mon.waitErr(t, "maximum subscriptions exceeded")
	waitFor(t, "the count", func() bool { return s.Status().Agents[3].Violations[wire.ViolationSubscriptions] == 1 })
	if err := mon.Publish(wire.Events(3), []byte("still here")); err != nil {
		t.Fatal(err)
	}
	bystander.waitMsg(t, wire.Events(3), "still here")
}

// A reader that does not keep up is cut at bus.max_pending: its
// connection closed and counted, the publisher and every other reader
// unaffected.
func TestSlowConsumerIsCut(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	c := ForFlock(testFlock(), ids.keys())
	c.MaxPending = spec.MinMaxPending
	s := startBus(t, c, Options{})
	slow := rawConnect(t, s, ids["flock-3"])
	defer slow.Close()
	fmt.Fprintf(slow, "SUB agent.*.events 1\r\nPING\r\n")
	orch := connect(t, s, ids, "flock-1")
	other := record(t, orch, wire.Events(2))
	worker := connect(t, s, ids, "flock-2")
	big := bytes.Repeat([]byte("x"), 1<<20)
	for i := range 64 {
		if err := worker.Publish(wire.Events(2), big); err != nil {
			t.Fatal(err)
		}
		// The other reader has each before the next is sent: it keeps up
		// however busy the machine (a burst could leave it, too, more than
		// max_pending behind while it waits for a CPU), and the slow
		// reader still falls 64 MB behind.
		waitFor(t, fmt.Sprintf("message %d to the other reader", i+1), func() bool {
			other.mu.Lock()
			defer other.mu.Unlock()
			return len(other.msgs) > i
		})
	}
	worker.Publish(wire.Events(2), []byte("last"))
	if err := worker.Flush(); err != nil {
		t.Fatalf("the publisher after the slow reader: %v", err)
	}
	other.waitMsg(t, wire.Events(2), "last")
	waitFor(t, "the slow reader counted", func() bool { return s.Status().Agents[3].Violations[wire.ViolationSlowConsumer] == 1 })
	// The server closes it once its last write gives up (its write
	// deadline, 10 s): until then it still counts against agent 3's share.
	deadline := time.Now().Add(20 * time.Second)
	for s.Status().Agents[3].Connections != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow reader's connection is still open")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A message larger than the bus carries closes its sender's connection,
// counted; nats.go refuses it before sending, so a raw client sends it.
func TestOversizedMessageIsCut(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	raw := rawConnect(t, s, ids["flock-2"])
	defer raw.Close()
	fmt.Fprintf(raw, "PUB agent.2.events %d\r\n", MaxPayload+1)
	waitFor(t, "the count", func() bool { return s.Status().Agents[2].Violations[wire.ViolationPayload] == 1 })
	connect(t, s, ids, "flock-2")
}
