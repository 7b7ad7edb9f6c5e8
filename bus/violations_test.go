package bus

// Tier: unit (no root). A real in-process nats-server (port -1) and real
// clients: what the bus counts, keeps and writes when agents misbehave.

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/syncbuf"
	"github.com/flockrun/flock/wire"
)

func byKind(s *Server, id int) map[string]uint64 { return s.Status().Agents[id].Violations }

// TestViolationsCountedByKind checks each kind is counted for the agent
// that did it, and the total with them.
//
// Tier: unit (no root).
func TestViolationsCountedByKind(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	worker := connect(t, s, ids, "flock-2")
	for _, subj := range []string{"agent.1.heartbeat", "tasks.agent.3"} {
		if err := worker.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := worker.SubscribeSync("_INBOX.flock-1.>"); err != nil {
		t.Fatal(err)
	}
	if err := worker.Publish(wire.Heartbeat(2), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	s.Violation(2, wire.ViolationForgedLease, "a result for task t-1, delivered to agent 4")
	want := map[string]uint64{wire.ViolationPublish: 2, wire.ViolationSubscribe: 1, wire.ViolationMalformed: 1, wire.ViolationForgedLease: 1}
	waitFor(t, "agent 2's violations by kind", func() bool { return maps.Equal(byKind(s, 2), want) })
	if st := s.Status(); st.Agents[2].ViolationsTotal != 5 || len(st.Agents[1].Violations)+len(st.Agents[3].Violations) != 0 {
		t.Errorf("status %+v, want 5 violations of agent 2 and none of the others", st.Agents)
	}
}

// TestViolationsSurviveARestart checks the counts are in the StoreDir: a
// new bus on it has them, and forgets an agent no longer configured.
//
// Tier: unit (no root).
func TestViolationsSurviveARestart(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	dir := t.TempDir()
	c := ForFlock(testFlock(), ids.keys())
	s := startBus(t, c, Options{StoreDir: dir})
	for _, name := range []string{"flock-1", "flock-2"} {
		nc := connect(t, s, ids, name)
		if err := nc.Publish("flock.bus.reload", nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Violation(2, wire.ViolationStaleLease, "an ack after the lease ended")
	waitFor(t, "the violations", func() bool {
		return s.Status().Agents[1].ViolationsTotal == 1 && s.Status().Agents[2].ViolationsTotal == 2
	})
	s.Shutdown()

	s2 := startBus(t, c, Options{StoreDir: dir})
	if got, want := byKind(s2, 2), map[string]uint64{wire.ViolationPublish: 1, wire.ViolationStaleLease: 1}; !maps.Equal(got, want) {
		t.Errorf("after a restart agent 2 has %v, want %v", got, want)
	}
	s2.Shutdown()

	// Agent 1 left the flock: its id may come back as another agent.
	f := testFlock()
	f.Agents = f.Agents[1:]
	s3 := startBus(t, ForFlock(f, ids.keys("flock-1")), Options{StoreDir: dir})
	if got := byKind(s3, 1); got != nil {
		t.Errorf("agent 1 is gone but keeps %v", got)
	}
	if got := byKind(s3, 2); got[wire.ViolationPublish] != 1 {
		t.Errorf("agent 2 lost its count when agent 1 left: %v", got)
	}
	s3.Shutdown()
	if b, err := os.ReadFile(filepath.Join(dir, violationsFile)); err != nil || strings.Contains(string(b), `"1"`) {
		t.Errorf("%s after agent 1 left: %v\n%s", violationsFile, err, b)
	}
}

// TestOneAgentsFloodHidesNoOneElse: 10,000 unreadable heartbeats and
// 10,000 refused publishes from agent 1 write a handful of lines, all
// counted; agent 2's one violation after them is logged and counted.
//
// Tier: unit (no root).
func TestOneAgentsFloodHidesNoOneElse(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	var log syncbuf.Buffer
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Log: &log})
	flooder := connect(t, s, ids, "flock-1")
	worker := connect(t, s, ids, "flock-2")
	const n = 10000
	for range n {
		if err := flooder.Publish(wire.Heartbeat(1), []byte("{not json")); err != nil {
			t.Fatal(err)
		}
		if err := flooder.Publish("agent.2.heartbeat", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := flooder.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flood counted", func() bool {
		v := byKind(s, 1)
		return v[wire.ViolationMalformed] == n && v[wire.ViolationPublish] == n
	})
	if err := worker.Publish("agent.1.heartbeat", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent 2's violation counted", func() bool { return s.Status().Agents[2].ViolationsTotal == 1 })
	if v := byKind(s, 1); v[wire.ViolationFlood] != 1 {
		t.Errorf("agent 1's %d heartbeats within seconds: %d flood violations, want 1", n, v[wire.ViolationFlood])
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var ofAgent1, ofAgent2 int
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"$G/flock-2" - Publish Violation - Subject "agent.1.heartbeat"`):
			ofAgent2++
		case strings.Contains(l, "flock-1") || strings.Contains(l, "agent 1"):
			ofAgent1++
		}
	}
	if ofAgent1 > 5 || ofAgent2 != 1 {
		t.Errorf("%d lines about agent 1's flood (want a handful), %d about agent 2's violation (want 1); the log's end:\n%s",
			ofAgent1, ofAgent2, tailOf(log.String(), 2000))
	}
	s.Shutdown()
	for _, want := range []string{"(9999 more publish lines like it from agent 1", "(9999 more malformed lines like it from agent 1"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("at shutdown the log does not say %q:\n%s", want, tailOf(log.String(), 2000))
		}
	}
	t.Logf("%d log lines in all for %d messages of agent 1's flood and agent 2's one violation", len(lines), 2*n)
}

// TestForgedAttribution: agent 1 names its connection and picks a subject
// so that its violation's line reads like agent 2's; it is counted and
// limited as agent 1's.
//
// Tier: unit (no root).
func TestForgedAttribution(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	var log syncbuf.Buffer
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Log: &log})
	k2 := ids.keys()["flock-2"]
	fake := `x" - "$G/nkey:` + k2 + `" - Publish Violation - Subject "%s`
	agent1 := connect(t, s, ids, "flock-1", nats.Name(fake))
	for _, subj := range []string{`"$G/flock-2"`, `"$G/nkey:` + k2 + `"`, `$G/flock-2`} {
		if err := agent1.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "agent 1's violations", func() bool { return s.Status().Agents[1].ViolationsTotal == 3 })
	if v := s.Status().Agents[2]; v.ViolationsTotal != 0 {
		t.Errorf("agent 1's violations counted against agent 2: %+v", v.Violations)
	}
	// Agent 2's own violation still gets its line: agent 1 did not use
	// up agent 2's window.
	worker := connect(t, s, ids, "flock-2")
	if err := worker.Publish("agent.1.heartbeat", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent 2's violation", func() bool { return s.Status().Agents[2].ViolationsTotal == 1 })
	if n := strings.Count(log.String(), "Publish Violation - Subject \"agent.1.heartbeat\""); n != 1 {
		t.Errorf("agent 2's violation logged %d times, want once:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "Publish Violation"); n != 1+2 { // agent 1's one line reads "Publish Violation" twice
		t.Errorf("%d mentions of Publish Violation, want agent 1's one line (2) and agent 2's (1):\n%s", n, log.String())
	}
}

// TestLedgerCountsOnlyConfiguredAgents: the operator may publish on any
// agent.N.heartbeat; an id not in the config leaves no count.
//
// Tier: unit (no root).
func TestLedgerCountsOnlyConfiguredAgents(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	op := connect(t, s, ids, creds.OperatorName)
	for _, id := range []int{2, 99} {
		if err := op.Publish(wire.Heartbeat(id), []byte("{not json")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "agent 2's malformed heartbeat", func() bool { return byKind(s, 2)[wire.ViolationMalformed] == 1 })
	if got := s.ledger.of(99); got != nil {
		t.Errorf("agent 99 is not in the flock but has %v", got)
	}
}
