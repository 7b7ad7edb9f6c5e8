package netpolicy

// Tier: unit for Fake; root (netns) for NFT, in a fresh network namespace.
//
// One suite, run against both Firewalls, so the fake the planner is tested
// against cannot drift from the kernel's table.

import (
	"context"
	"errors"
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
}

func TestFirewallConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) firewallUnderTest
	}{
		{"Fake", func(t *testing.T) firewallUnderTest { return firewallUnderTest{fw: NewFake()} }},
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
			}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { firewallConformance(t, tc.make) })
	}
}

// firewallConformance checks the contract the planner relies on: Ensure
// replaces the table whatever was there and is idempotent; Matches is
// true exactly for the policy last ensured (in any order of uids and
// allowances) and false, without error, when there is no table; an
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
	}{
		{name: "no table: Matches is false, Remove is not an error",
			do:      func(ctx context.Context) error { return fw.Remove(ctx) },
			matches: []match{{"p", p, false}, {"no agents", noAgents, false}}},
		{name: "Ensure writes the policy",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, p) },
			matches: []match{{"p", p, true}, {"p reordered", reordered, true}, {"an extra uid", extraUID, false}, {"another bus port", otherPort, false}}},
		{name: "Ensure again changes nothing",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, p) },
			matches: []match{{"p", p, true}, {"an extra uid", extraUID, false}}},
		{name: "Ensure of an invalid policy is refused and changes nothing",
			do: func(ctx context.Context) error { return fw.Ensure(ctx, bad) }, wantErr: errAnyFW,
			matches: []match{{"p", p, true}}},
		{name: "Matches of an invalid policy is an error",
			do: func(ctx context.Context) error { _, err := fw.Matches(ctx, bad); return err }, wantErr: errAnyFW,
			matches: []match{{"p", p, true}}},
		{name: "Ensure replaces the table",
			do:      func(ctx context.Context) error { return fw.Ensure(ctx, otherPort) },
			matches: []match{{"another bus port", otherPort, true}, {"p", p, false}}},
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
			matches: []match{{"no agents", noAgents, false}, {"p", p, false}}},
		{name: "Remove again is not an error",
			do:      func(ctx context.Context) error { return fw.Remove(ctx) },
			matches: []match{{"no agents", noAgents, false}}},
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
			for _, m := range s.matches {
				if ok, err := fw.Matches(ctx, m.p); ok != m.want || err != nil {
					t.Errorf("Matches(%s) = %v, %v; want %v, nil", m.name, ok, err, m.want)
				}
			}
			if sub.foreignIntact != nil {
				sub.foreignIntact(t)
			}
		}) {
			t.FailNow()
		}
	}
}

// errAnyFW stands for "some error" where the contract names no sentinel.
var errAnyFW = errors.New("any error")
