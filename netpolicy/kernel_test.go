package netpolicy

// Tier: root (netns).
//
// The real kernel, in a fresh network namespace per test: what an agent's
// sockets can and cannot reach once Ensure has run, and that Matches,
// Remove and Ensure behave on a live table next to other people's tables
// (the calls' contract alone is firewallConformance's).

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
)

const (
	uidBase = spec.DefaultUIDBase
	agent1  = uidBase + 1
	agent2  = uidBase + 2
	nobody  = 65534
)

// testPolicy: agent 1 may also reach tcp 127.0.0.2:9000, agent 2 anything
// udp on ::1. Both stay inside the namespace's loopback.
func testPolicy() Policy {
	return ForFlock(&spec.Flock{
		UIDBase: uidBase,
		Bus:     spec.Bus{Host: "127.0.0.1", Port: 4222},
		Agents: []spec.Agent{
			{ID: 1, Egress: []spec.Egress{{Prefix: netip.MustParsePrefix("127.0.0.2/32"), Port: 9000, Proto: "tcp"}}},
			{ID: 2, Egress: []spec.Egress{{Prefix: netip.MustParsePrefix("::1/128"), Proto: "udp"}}},
		},
	})
}

// foreign is what docker, ufw or an operator might have: a table of another
// name in the same family, and a table of our name in another family.
const foreign = `
table inet foreign {
	set blocked { type ipv4_addr; elements = { 192.0.2.1 } }
	chain out { type filter hook output priority 10; policy accept; ip daddr @blocked counter drop; }
}
table ip flock {
	chain c { ip daddr 192.0.2.2 counter; }
}
`

func TestKernel(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)

	ns.serveTCP(t, "127.0.0.1:4222") // the bus
	ns.serveTCP(t, "[::1]:4222")     // the bus port, but not the bus address
	ns.serveTCP(t, "127.0.0.1:8080")
	ns.serveTCP(t, "[::1]:8080")
	ns.serveTCP(t, "127.0.0.2:9000") // agent 1's allowance
	ns.serveUDP(t, "127.0.0.1:53")   // a resolver
	ns.serveUDP(t, "[::1]:5353")     // agent 2's allowance (udp, any port, ::1)

	// Without the table everything is reachable: the refusals below are ours.
	ns.expectOK(t, "agent 1, no table yet", agent1, "dial", "tcp", "127.0.0.1:8080")
	ns.expectOK(t, "agent 1, no table yet", agent1, "dial", "udp", "127.0.0.1:53")
	ns.expectOK(t, "agent 1, no table yet", agent1, "ping", "", "127.0.0.1")

	ns.nftScript(t, foreign)
	foreignBefore := ns.nft(t, "list", "table", "inet", "foreign")
	ipFlockBefore := ns.nft(t, "list", "table", "ip", "flock")
	checkForeign := func(when string) {
		t.Helper()
		if got := ns.nft(t, "list", "table", "inet", "foreign"); got != foreignBefore {
			t.Errorf("%s: table inet foreign changed:\n%s", when, golden.LineDiff(foreignBefore, got))
		}
		if got := ns.nft(t, "list", "table", "ip", "flock"); got != ipFlockBefore {
			t.Errorf("%s: table ip flock changed:\n%s", when, golden.LineDiff(ipFlockBefore, got))
		}
	}

	t.Run("nft prints the reference table", func(t *testing.T) {
		if err := fw.Ensure(ctx, reference()); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "nft-list.golden"),
			"# `nft list table inet flock` after Ensure(reference()); regenerate as root with -run Kernel -update\n"+
				ns.nft(t, "list", "table", "inet", "flock"))
		if ok, err := fw.Matches(ctx, reference()); !ok || err != nil {
			t.Errorf("Matches(reference) = %v, %v right after Ensure", ok, err)
		}
		checkForeign("after Ensure")
	})

	p := testPolicy()
	if err := fw.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	matches := func(want bool, when string) {
		t.Helper()
		ok, err := fw.Matches(ctx, p)
		if err != nil || ok != want {
			cur, _, _ := fw.Current(ctx)
			want, _ := Render(p)
			t.Errorf("%s: Matches = %v, %v; want %v\n%s", when, ok, err, want, golden.LineDiff(want, cur))
		}
	}
	matches(true, "Ensure over another policy")
	if ok, _ := fw.Matches(ctx, reference()); ok {
		t.Errorf("Matches(reference) true after Ensure(testPolicy)")
	}
	listed := ns.nft(t, "list", "table", "inet", "flock")

	t.Run("agents reach the bus and nothing else", func(t *testing.T) {
		for _, uid := range []int{agent1, agent2} {
			who := fmt.Sprintf("agent %d", uid-uidBase)
			ns.expectOK(t, who, uid, "dial", "tcp", "127.0.0.1:4222")
			ns.expectRefused(t, who, uid, "dial", "tcp", "127.0.0.1:8080")
			ns.expectRefused(t, who, uid, "dial", "tcp6", "[::1]:8080")
			ns.expectRefused(t, who, uid, "dial", "tcp6", "[::1]:4222")
			ns.expectRefused(t, who, uid, "dial", "udp", "127.0.0.1:53")
			ns.expectRefused(t, who, uid, "dial", "udp", "127.0.0.1:4222")
			ns.expectRefused(t, who, uid, "ping", "", "127.0.0.1")
		}
	})

	t.Run("an allowance serves its own agent only", func(t *testing.T) {
		ns.expectOK(t, "agent 1", agent1, "dial", "tcp", "127.0.0.2:9000")
		ns.expectRefused(t, "agent 2", agent2, "dial", "tcp", "127.0.0.2:9000")
		ns.expectOK(t, "agent 2", agent2, "dial", "udp6", "[::1]:5353")
		ns.expectRefused(t, "agent 1", agent1, "dial", "udp6", "[::1]:5353")
	})

	t.Run("other uids are not ours to judge", func(t *testing.T) {
		for _, uid := range []int{nobody, 0} {
			ns.expectOK(t, "non-agent", uid, "dial", "tcp", "127.0.0.1:8080")
			ns.expectOK(t, "non-agent", uid, "dial", "tcp6", "[::1]:8080")
			ns.expectOK(t, "non-agent", uid, "dial", "udp", "127.0.0.1:53")
			ns.expectOK(t, "non-agent", uid, "dial", "tcp", "127.0.0.2:9000")
			ns.expectOK(t, "non-agent", uid, "ping", "", "127.0.0.1")
		}
	})

	t.Run("an agent cannot serve", func(t *testing.T) {
		ns.agentListener(t, agent1, "127.0.0.1:7000")
		// Another agent is stopped at its own SYN.
		ns.expectRefused(t, "agent 2 to agent 1's port", agent2, "dial", "tcp", "127.0.0.1:7000")
		// A non-agent's SYN gets there, but the agent's SYN-ACK is an agent
		// packet too and is rejected: no connection, no banner.
		ns.do(t, func() {
			c, err := net.DialTimeout("tcp", "127.0.0.1:7000", 1500*time.Millisecond)
			if err != nil {
				t.Logf("root to agent 1's listener: %v (as expected)", err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 16)
			if n, _ := c.Read(buf); n > 0 {
				t.Errorf("root got %q from agent 1's listener", buf[:n])
			}
		})
	})

	t.Run("a second Ensure of the same policy changes nothing", func(t *testing.T) {
		if err := fw.Ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
		// Counters restart with the new table, so the text (counter values
		// included) is the same as right after the first Ensure.
		if got := ns.nft(t, "list", "table", "inet", "flock"); got != listed {
			t.Errorf("nft list differs after the second Ensure:\n%s", golden.LineDiff(listed, got))
		}
		matches(true, "second Ensure")
		ns.expectOK(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:4222")
		ns.expectRefused(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:8080")
		checkForeign("after the second Ensure")
	})

	t.Run("the counter counts rejections", func(t *testing.T) {
		if err := fw.Ensure(ctx, p); err != nil { // start from zero
			t.Fatal(err)
		}
		if pk, _, err := fw.Denied(ctx); err != nil || pk != 0 {
			t.Fatalf("Denied after Ensure = %d, %v; want 0", pk, err)
		}
		ns.expectOK(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:4222") // allowed: not counted
		ns.expectRefused(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:8080")
		ns.expectRefused(t, "agent 2", agent2, "dial", "udp", "127.0.0.1:53")
		ns.expectRefused(t, "agent 1", agent1, "dial", "tcp6", "[::1]:8080")
		ns.expectOK(t, "nobody", nobody, "dial", "tcp", "127.0.0.1:8080") // not an agent: not counted
		poll(t, 2*time.Second, "denied counter at 3", func() (bool, string) {
			pk, by, err := fw.Denied(ctx)
			return err == nil && pk == 3 && by > 0, fmt.Sprintf("%d packets, %d bytes, %v", pk, by, err)
		})
		if out := ns.nft(t, "list", "counter", "inet", "flock", DeniedCounter); !strings.Contains(out, "packets 3 ") {
			t.Errorf("nft list counter: %s", out)
		}
	})

	t.Run("Matches sees drift", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			drift func(t *testing.T)
		}{
			{"nft flush table", func(t *testing.T) { ns.nft(t, "flush", "table", "inet", "flock") }},
			{"nft delete element", func(t *testing.T) {
				ns.nft(t, "delete", "element", "inet", "flock", AgentsSet, fmt.Sprintf("{ %d }", agent1))
			}},
			{"nft add element", func(t *testing.T) { ns.nft(t, "add", "element", "inet", "flock", AgentsSet, "{ 12345 }") }},
			{"nft delete a host block", func(t *testing.T) {
				ns.nft(t, "delete", "element", "inet", "flock", Host4Set, "{ 127.0.0.0/8 }")
			}},
			{"nft delete a host type", func(t *testing.T) {
				ns.nft(t, "delete", "element", "inet", "flock", HostTypesSet, "{ local }")
			}},
			{"nft delete rule", func(t *testing.T) {
				ns.nft(t, "delete", "rule", "inet", "flock", Chain, "handle", ruleHandle(t, ns, `comment "bus"`))
			}},
			{"nft insert rule", func(t *testing.T) {
				ns.nft(t, "insert", "rule", "inet", "flock", Chain, "meta", "skuid", fmt.Sprint(agent1), "accept")
			}},
			{"nft add chain", func(t *testing.T) { ns.nft(t, "add", "chain", "inet", "flock", "extra") }},
			{"nft delete table", func(t *testing.T) { ns.nft(t, "delete", "table", "inet", "flock") }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.drift(t)
				matches(false, "after "+tc.name)
				if err := fw.Ensure(ctx, p); err != nil {
					t.Fatal(err)
				}
				matches(true, "Ensure after "+tc.name)
			})
		}
		checkForeign("after the drift repairs")
	})

	t.Run("Remove deletes our table only", func(t *testing.T) {
		if err := fw.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if out := ns.nft(t, "list", "tables"); strings.Contains(out, "table inet flock") {
			t.Errorf("table inet flock still listed:\n%s", out)
		}
		matches(false, "after Remove")
		if _, present, err := fw.Current(ctx); present || err != nil {
			t.Errorf("Current after Remove: present %v, %v", present, err)
		}
		checkForeign("after Remove")
		ns.expectOK(t, "agent 1, table removed", agent1, "dial", "tcp", "127.0.0.1:8080")
	})
}

// ruleHandle finds the handle of the rule of our chain whose line contains
// match, from `nft -a list chain`.
func ruleHandle(t *testing.T, ns *netNS, match string) string {
	t.Helper()
	out := ns.nft(t, "-a", "list", "chain", "inet", "flock", Chain)
	re := regexp.MustCompile(`# handle (\d+)$`)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, match) {
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("no rule with %s in:\n%s", match, out)
	return ""
}

// TestKernelErrors: what an operator reads when the kernel says no.
func TestKernelErrors(t *testing.T) {
	requireRoot(t)
	fw := NewInNetNS(-1) // not a namespace: every call must fail, and say what it was doing
	err := fw.Ensure(context.Background(), reference())
	if err == nil || !strings.HasPrefix(err.Error(), "nftables: replacing table inet flock: ") {
		t.Errorf("Ensure with a bad namespace fd: %v", err)
	}
	t.Logf("Ensure with a bad namespace fd: %v", err)
	if _, err := fw.Matches(context.Background(), reference()); err == nil || !strings.HasPrefix(err.Error(), "nftables: reading table inet flock") {
		t.Errorf("Matches with a bad namespace fd: %v", err)
	}
}

// TestKernelRoundTrip: every golden policy is accepted by the kernel, reads
// back as exactly what was sent (Matches), and is readable nft syntax.
func TestKernelRoundTrip(t *testing.T) {
	eachGoldenInNetNS(t, func(t *testing.T, ctx context.Context, ns *netNS, fw *NFT, p Policy) {
		if ok, err := fw.Matches(ctx, p); !ok || err != nil {
			cur, _, _ := fw.Current(ctx)
			want, _ := Render(p)
			t.Errorf("Matches = %v, %v\n%s", ok, err, golden.LineDiff(want, cur))
		}
		out := ns.nft(t, "list", "table", "inet", "flock")
		if !strings.Contains(out, "flock policy "+p.Hash()) {
			t.Errorf("nft list does not show the policy hash:\n%s", out)
		}
		t.Logf("nft list table inet flock:\n%s", out)
	})
}

// eachGoldenInNetNS puts every golden policy in force in one new network
// namespace, one after the other, and checks each in a subtest.
func eachGoldenInNetNS(t *testing.T, check func(t *testing.T, ctx context.Context, ns *netNS, fw *NFT, p Policy)) {
	requireRoot(t)
	ctx := context.Background()
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)
	for name, p := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			if err := fw.Ensure(ctx, p); err != nil {
				t.Fatal(err)
			}
			check(t, ctx, ns, fw, p)
		})
	}
}
