package netpolicy

// Tier: unit for Fake; root (netns) for NFT, in a fresh network namespace.
//
// One suite, run against both Firewalls, so the fake the planner is tested
// against cannot drift from the kernel's table.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
)

// firewallUnderTest is a Firewall with, for the real one, a foreign
// table beside ours that the suite checks nobody touched.
type firewallUnderTest struct {
	fw Firewall
	// foreignIntact fails t if the foreign tables changed; nil when the
	// implementation has none (the fake).
	foreignIntact func(t *testing.T)
	// send is n packets of uid to a destination no allowance covers, sent
	// at once; it returns how many the table refused.
	send func(t *testing.T, uid uint32, n int) (refused int)
}

func TestFirewallConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) firewallUnderTest
	}{
		{"Fake", func(t *testing.T) firewallUnderTest {
			f := NewFake()
			return firewallUnderTest{fw: f, send: func(_ *testing.T, uid uint32, n int) int {
				if _, agent := slices.BinarySearch(testPolicy().AgentUIDs, uid); !agent {
					return 0
				}
				f.Refuse(uid, uint64(n))
				return n
			}}
		}},
		{"NFT", func(t *testing.T) firewallUnderTest {
			requireRoot(t)
			ns := newNetNS(t)
			ns.nftScript(t, foreign)
			list := func(t *testing.T) string {
				return ns.nft(t, "list", "table", "inet", "foreign") + ns.nft(t, "list", "table", "ip", "flock")
			}
			before := list(t)
			return firewallUnderTest{fw: NewInNetNS(ns.fd), foreignIntact: func(t *testing.T) {
				t.Helper()
				if after := list(t); after != before {
					t.Errorf("foreign tables changed:\n%s\nwas:\n%s", after, before)
				}
			}, send: func(t *testing.T, uid uint32, n int) int {
				t.Helper()
				r := ns.probeN(t, int(uid), "flood", "udp", "127.0.0.1:9", n)
				if !r.OK {
					t.Fatalf("uid %d sending %d datagrams: %s", uid, n, r.Err)
				}
				return r.N
			}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { firewallConformance(t, tc.make) })
	}
}

// firewallConformance checks the contract the planner relies on: Ensure
// replaces the table whatever was there and is idempotent; Matches is
// true exactly for the policy last ensured (in any order of uids and
// allowances) and false, without error, when there is no table, and
// Current reads back Render of exactly those policies; an
// invalid policy is refused and changes nothing; Remove deletes the table
// and forgives an absent one; a cancelled context changes nothing and
// says so (errors.Is context.Canceled); no other table is ever touched.
func firewallConformance(t *testing.T, newFirewall func(t *testing.T) firewallUnderTest) {
	sub := newFirewall(t)
	fw := sub.fw
	p := testPolicy()
	reordered := p
	reordered.AgentUIDs = slices.Clone(p.AgentUIDs)
	slices.Reverse(reordered.AgentUIDs)
	reordered.Egress = maps.Clone(p.Egress)
	reordered.Egress[agent1] = append(slices.Clone(p.Egress[agent1]), p.Egress[agent1]...) // twice is once
	extraUID := p
	extraUID.AgentUIDs = append(slices.Clone(p.AgentUIDs), agent2+1)
	otherPort := p
	otherPort.BusPort = 4223
	noAgents := Policy{BusHost: netip.MustParseAddr("127.0.0.1"), BusPort: 4222}
	bad := p
	bad.BusPort = 0
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	type match struct {
		name string
		p    Policy
		want bool
	}
	for _, s := range []struct {
		name    string
		do      func(ctx context.Context) error
		wantErr error // nil: none; errAnyFW: any error
		matches []match
		// rulesOf, when set, is the policy RulesFor must read back as
		// in force (a zero Policy: no table, no rules).
		rulesOf *Policy
		// refused, when set, checks what Refused reads after the step.
		refused func(t *testing.T, got map[uint32]Refusals)
	}{
		{name: "no table: Matches is false, Remove is not an error",
			do:      func(ctx context.Context) error { return fw.Remove(ctx) },
			matches: []match{{"p", p, false}, {"no agents", noAgents, false}}},
		{name: "Ensure writes the policy",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, p) },
			matches: []match{{"p", p, true}, {"p reordered", reordered, true}, {"an extra uid", extraUID, false}, {"another bus port", otherPort, false}},
			rulesOf: &p},
		{name: "Ensure again changes nothing",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, p) },
			matches: []match{{"p", p, true}, {"an extra uid", extraUID, false}},
			refused: none},
		// The log limit is per agent: agent 1 sending refused packets as
		// fast as it can gets its first few logged and the rest counted,
		// and agent 2's single refusal is still logged. What the packet
		// path writes into the table is not drift.
		{name: "refusals are counted, and their logging limited, per agent",
			do: func(context.Context) error {
				for _, x := range []struct{ uid, n, refused uint32 }{{agent1, 1000, 1000}, {agent2, 1, 1}, {nobody, 10, 0}} {
					if got := sub.send(t, x.uid, int(x.n)); got != int(x.refused) {
						return fmt.Errorf("uid %d sent %d: %d refused, want %d", x.uid, x.n, got, x.refused)
					}
				}
				return nil
			},
			matches: []match{{"p", p, true}},
			refused: func(t *testing.T, got map[uint32]Refusals) {
				a, b := got[agent1], got[agent2]
				t.Logf("agent 1: %+v, agent 2: %+v", a, b)
				if a.Refused != 1000 || a.Logged < 1 || a.Logged > logBurst+1 {
					t.Errorf("agent 1 flooded 1000: got %+v, want 1000 refused and 1..%d logged", a, logBurst+1)
				}
				if b != (Refusals{Refused: 1, Logged: 1}) {
					t.Errorf("agent 2 sent 1 after agent 1's flood: got %+v, want it refused and logged", b)
				}
				if len(got) != 2 {
					t.Errorf("Refused = %+v, want agents 1 and 2 only", got)
				}
			}},
		{name: "Ensure of an invalid policy is refused and changes nothing",
			do: func(ctx context.Context) error { return fw.Ensure(ctx, bad) }, wantErr: errAnyFW,
			matches: []match{{"p", p, true}}},
		{name: "Matches of an invalid policy is an error",
			do: func(ctx context.Context) error { _, err := fw.Matches(ctx, bad); return err }, wantErr: errAnyFW,
			matches: []match{{"p", p, true}}},
		{name: "Ensure replaces the table",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, otherPort) },
			matches: []match{{"another bus port", otherPort, true}, {"p", p, false}},
			refused: none},
		{name: "a cancelled Refused is an error",
			do: func(context.Context) error { _, err := fw.Refused(cancelled); return err }, wantErr: context.Canceled,
			matches: []match{{"another bus port", otherPort, true}}},
		{name: "Ensure of a policy with no agents",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, noAgents) },
			matches: []match{{"no agents", noAgents, true}, {"another bus port", otherPort, false}}},
		{name: "a cancelled Ensure changes nothing",
			do: func(context.Context) error { return fw.Ensure(cancelled, p) }, wantErr: context.Canceled,
			matches: []match{{"no agents", noAgents, true}, {"p", p, false}}},
		{name: "a cancelled Remove changes nothing",
			do: func(context.Context) error { return fw.Remove(cancelled) }, wantErr: context.Canceled,
			matches: []match{{"no agents", noAgents, true}}},
		{name: "a cancelled Matches is an error",
			do: func(context.Context) error { _, err := fw.Matches(cancelled, noAgents); return err }, wantErr: context.Canceled,
			matches: []match{{"no agents", noAgents, true}}},
		{name: "Remove deletes the table",
			do:      func(ctx context.Context) error { return fw.Remove(ctx) },
			matches: []match{{"no agents", noAgents, false}, {"p", p, false}},
			rulesOf: &Policy{}},
		{name: "Remove again is not an error",
			do:      func(ctx context.Context) error { return fw.Remove(ctx) },
			matches: []match{{"no agents", noAgents, false}},
			refused: none},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			err := s.do(ctx)
			switch {
			case s.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case s.wantErr != nil && err == nil:
				t.Fatalf("no error, want %v", s.wantErr)
			case s.wantErr != nil && s.wantErr != errAnyFW && !errors.Is(err, s.wantErr):
				t.Fatalf("error %v does not match %v", err, s.wantErr)
			}
			table, present, err := fw.Current(ctx)
			if err != nil {
				t.Fatalf("Current: %v", err)
			}
			for _, m := range s.matches {
				if ok, err := fw.Matches(ctx, m.p); ok != m.want || err != nil {
					t.Errorf("Matches(%s) = %v, %v; want %v, nil", m.name, ok, err, m.want)
				}
				// A saved host state compares what Current read with
				// Render: the same verdict as Matches.
				if want, _ := Render(m.p); (present && table == want) != m.want {
					t.Errorf("Current (present %v) as Render(%s): %v, want %v", present, m.name, !m.want, m.want)
				}
			}
			if s.rulesOf != nil {
				for _, uid := range []uint32{agent1, agent2, nobody} {
					got, err := fw.RulesFor(ctx, uid)
					var want []string
					if s.rulesOf.BusPort != 0 {
						want, _ = PlannedRulesFor(*s.rulesOf, uid)
					}
					if err != nil || !slices.Equal(got, want) {
						t.Errorf("RulesFor(%d) = %q, %v; want %q", uid, got, err, want)
					}
				}
			}
			if s.refused != nil {
				got, err := fw.Refused(ctx)
				if err != nil {
					t.Fatalf("Refused: %v", err)
				}
				s.refused(t, got)
			}
			if sub.foreignIntact != nil {
				sub.foreignIntact(t)
			}
		}) {
			t.FailNow()
		}
	}
}

// none is Refused of a table no packet was denied by, or of no table.
func none(t *testing.T, got map[uint32]Refusals) {
	if len(got) != 0 {
		t.Errorf("Refused = %+v, want none", got)
	}
}

// errAnyFW stands for "some error" where the contract names no sentinel.
var errAnyFW = errors.New("any error")
