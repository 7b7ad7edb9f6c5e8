package bus

import (
	"context"
	"testing"
	"time"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// TestModelReports: the model gateway's report of an agent reaches
// flockctl status and /metrics through the bus, a later one replaces it,
// and no agent may publish one (its counts are the proxy's alone).
//
// Tier: unit (no root).
func TestModelReports(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append([]string{creds.ProxyName}, everyoneAnd4...)...)
	s := taskBus(t, ids, Options{}, nil)
	proxy := connect(t, s, ids, creds.ProxyName)
	agent := connect(t, s, ids, "flock-1")
	at := time.Now().UTC()
	report := func(c *client, agent int, requests uint64, when time.Time) {
		t.Helper()
		u := wire.ModelUsage{Requests: requests, Tokens: wire.Tokens{InputTokens: 10 * requests}, LatencyBuckets: make([]uint64, len(wire.LatencyBounds)+1)}
		b, err := wire.EncodeModelReport(wire.ModelReport{Agent: agent, At: when, Usage: map[string]wire.ModelUsage{"anthropic": u},
			Limit: map[string]wire.ModelLimits{"anthropic": {TokensPerDay: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Publish(wire.UsageSubject(agent), b)
		c.Flush()
	}
	report(proxy, 2, 3, at)
	report(proxy, 2, 1, at.Add(-time.Minute)) // older: ignored
	report(agent, 1, 999, at)                 // an agent's forgery: refused by the bus
	report(proxy, 3, 1, at)                   // after the others on the one subscription: once it shows, they were read
	waitFor(t, "the proxy's reports", func() bool {
		snap, _ := s.Snapshot(context.Background())
		return snap.Agents[3].Models != nil
	})
	st := s.Status()
	if m := st.Agents[2].Models; m == nil || m.Usage["anthropic"].Requests != 3 || m.Limit["anthropic"].TokensPerDay != 1000 {
		t.Errorf("agent 2's status: %+v", m)
	}
	if m := st.Agents[1].Models; m != nil {
		t.Errorf("agent 1 forged its counts: %+v", m)
	}
	agent.waitErr(t, "Permissions Violation for Publish to \"flock.usage.1\"")
}
