package netpolicy

// Tier: unit (the planned rules, the fake); root (netns) for what the
// kernel's table reads back as, against `nft list` itself.

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestPlannedRulesFor(t *testing.T) {
	p := reference()
	bus := []string{
		`meta skuid @agents ip daddr 127.0.0.1 tcp dport 4222 tcp flags syn / syn,ack update @connectrate { meta skuid limit rate over 20/second burst 40 packets } update @refused { meta skuid counter } reject with tcp reset comment "bus: a new connection beyond the agent's connect rate, reset"`,
		`meta skuid @agents ip daddr 127.0.0.1 tcp dport 4230 tcp flags syn / syn,ack update @connectrate { meta skuid limit rate over 20/second burst 40 packets } update @refused { meta skuid counter } reject with tcp reset comment "proxy: a new connection beyond the agent's connect rate, reset"`,
		`meta skuid @agents ip daddr 127.0.0.1 tcp dport 4222 update @sendrate { meta skuid limit rate over 16 mbytes/second burst 32 mbytes } update @refused { meta skuid counter } drop comment "bus: beyond the agent's send rate, held back"`,
		`meta skuid @agents ip daddr 127.0.0.1 tcp dport 4222 accept comment "bus"`,
	}
	deny := []string{
		`meta skuid @agents counter name "denied" update @refused { meta skuid counter } update @denylog { meta skuid limit rate 5/minute } update @logged { meta skuid counter } log prefix "flock-deny " flags skuid comment "deny: count, log"`,
		`meta skuid @agents meta l4proto tcp reject with tcp reset comment "deny tcp: reset"`,
		`meta skuid @agents reject with icmpx admin-prohibited comment "deny the rest: admin-prohibited; flock policy ` + p.Hash() + `"`,
	}
	for _, tc := range []struct {
		name string
		uid  uint32
		want []string
	}{
		{"agent 1: the rates, the bus, its allowance, the denials", 2000000001, slices.Concat(bus, []string{
			`meta skuid 2000000001 ip daddr 10.1.2.0/24 ip daddr != @host4 fib daddr type != @hosttypes tcp dport 443 accept comment "egress of uid 2000000001, outside this host"`}, deny)},
		{"agent 2: the proxy, not agent 1's allowance", 2000000002, slices.Concat(bus, []string{
			`meta skuid 2000000002 ip daddr 127.0.0.1 tcp dport 4230 accept comment "egress of uid 2000000002"`}, deny)},
		{"a uid that is no agent's: nothing", 1000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlannedRulesFor(p, tc.uid)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("PlannedRulesFor(%d):\n%s\nwant:\n%s", tc.uid, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRulesForIsNftList: what RulesFor reads from the kernel is, line for
// line, what `nft list` prints of the same rules, for every golden policy
// (masks, IPv6, any port, any address) and for a rule added by hand.
func TestRulesForIsNftList(t *testing.T) {
	eachGoldenInNetNS(t, func(t *testing.T, ctx context.Context, ns *netNS, fw *NFT, p Policy) {
		// The output chain's: the input chain (a multi-host flock's) is
		// no agent's, see rulesFor.
		listed := ruleLines(ns.nft(t, "list", "chain", "inet", "flock", Chain))
		seen := map[string]bool{}
		for _, uid := range append(p.AgentUIDs, 1000) {
			got, err := fw.RulesFor(ctx, uid)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := PlannedRulesFor(p, uid); !slices.Equal(got, want) {
				t.Errorf("uid %d: RulesFor read back\n%s\nplanned\n%s", uid, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, r := range got {
				if !slices.Contains(listed, r) {
					t.Errorf("uid %d: %q is not a line of nft list:\n%s", uid, r, strings.Join(listed, "\n"))
				}
				seen[r] = true
			}
		}
		if len(p.AgentUIDs) > 0 && len(seen) != len(listed) {
			t.Errorf("the agents' rules cover %d of the %d rules nft lists", len(seen), len(listed))
		}
	})
}

// TestRulesForShowsARuleAddedByHand: a rule flock did not write is read
// for the uid it matches, as nft lists it, and not for another.
func TestRulesForShowsARuleAddedByHand(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)
	p := reference()
	if err := fw.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	ns.nft(t, "insert", "rule", "inet", "flock", "output", "meta", "skuid", "2000000002", "ip", "daddr", "127.0.0.1", "tcp", "dport", "8222", "accept")
	listed := ruleLines(ns.nft(t, "list", "table", "inet", "flock"))
	for _, tc := range []struct {
		uid  uint32
		want bool
	}{{2000000002, true}, {2000000001, false}} {
		got, err := fw.RulesFor(ctx, tc.uid)
		if err != nil {
			t.Fatal(err)
		}
		added := "meta skuid 2000000002 ip daddr 127.0.0.1 tcp dport 8222 accept"
		if slices.Contains(got, added) != tc.want || !slices.Contains(listed, added) {
			t.Errorf("uid %d: RulesFor has the added rule: %v, want %v\n%s\nnft list:\n%s", tc.uid, !tc.want, tc.want, strings.Join(got, "\n"), strings.Join(listed, "\n"))
		}
	}
}

// ruleLines are the rule lines of `nft list table`: those of the chain
// after its type line.
func ruleLines(listing string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "type filter hook"):
			in = true
		case l == "}":
			in = false
		case in && l != "":
			out = append(out, l)
		}
	}
	return out
}
