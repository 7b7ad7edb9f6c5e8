package netpolicy

// Tier: root (netns).
//
// A wide allowance means the world outside this host. Two namespaces joined
// by a veth pair: "host" (the agents' side, with its own loopback, global
// and link-local addresses) and "world" (the peer). An agent allowed
// 0.0.0.0/0 and ::/0 reaches the world and nothing that is the host.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

func TestKernelWideAllowance(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	host, world := newNetNS(t), newNetNS(t)
	for _, ns := range []*netNS{host, world} {
		// No duplicate address detection: addresses are usable at once.
		mustRun(t, "ip", "netns", "exec", ns.name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	mustRun(t, "ip", "-n", host.name, "link", "add", "wa", "type", "veth", "peer", "name", "wb", "netns", world.name)
	for _, x := range []struct {
		ns   *netNS
		dev  string
		addr []string
	}{
		{host, "wa", []string{"10.99.0.1/24", "169.254.9.1/16", "fd99::1/64", "fe80::1/64"}},
		{world, "wb", []string{"10.99.0.2/24", "169.254.9.2/16", "fd99::2/64", "fe80::2/64"}},
	} {
		for _, a := range x.addr {
			mustRun(t, "ip", "-n", x.ns.name, "addr", "add", a, "dev", x.dev, "nodad")
		}
		mustRun(t, "ip", "-n", x.ns.name, "link", "set", x.dev, "up")
	}
	// A default route, so that multicast and the world's addresses route
	// out through the veth rather than failing for want of a route.
	mustRun(t, "ip", "-n", host.name, "route", "add", "default", "via", "10.99.0.2")
	mustRun(t, "ip", "-n", host.name, "-6", "route", "add", "default", "via", "fd99::2")

	// The host's own listeners: loopback, its global and link-local
	// addresses, both versions; and two loopback ports for the explicit rule.
	own := []struct{ network, addr string }{
		{"tcp", "127.0.0.1:7001"},
		{"tcp", "10.99.0.1:7001"},
		{"tcp", "169.254.9.1:7001"},
		{"tcp6", "[::1]:7001"},
		{"tcp6", "[fd99::1]:7001"},
		{"tcp6", "[fe80::1%wa]:7001"},
	}
	for _, l := range own {
		host.serveTCP(t, l.addr)
	}
	host.serveTCP(t, "127.0.0.1:7002")
	host.serveTCP(t, "127.0.0.1:7003")
	world.serveTCP(t, "10.99.0.2:80")
	world.serveTCP(t, "[fd99::2]:80")
	world.serveTCP(t, "169.254.9.2:80")
	world.serveTCP(t, "[fe80::2%wb]:80")
	// Datagrams that reach the host itself although their address is not
	// one of its own: multicast (looped back), subnet and limited broadcast.
	sends := []string{"224.0.0.251:5353", "10.99.0.255:9", "255.255.255.255:9"}

	anyTCP := func(p string) spec.Egress { return spec.Egress{Prefix: netip.MustParsePrefix(p), Proto: "tcp"} }
	p := ForFlock(&spec.Flock{
		UIDBase: uidBase,
		Bus:     spec.Bus{Host: "127.0.0.1", Port: 4222},
		Agents: []spec.Agent{
			{ID: 1, Egress: []spec.Egress{anyTCP("0.0.0.0/0"), anyTCP("::/0"), {Prefix: netip.MustParsePrefix("0.0.0.0/0"), Proto: "udp"}}},
			{ID: 2, Egress: []spec.Egress{anyTCP("0.0.0.0/0"), {Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 7002, Proto: "tcp"}}},
		},
	})
	if err := NewInNetNS(host.fd).Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}

	t.Run("a non-agent reaches every listener, so the refusals below are ours", func(t *testing.T) {
		for _, l := range own {
			host.expectOK(t, "nobody", nobody, "dial", l.network, l.addr)
		}
		host.expectOK(t, "nobody", nobody, "dial", "tcp6", "[fe80::2%wa]:80")
		host.expectOK(t, "nobody", nobody, "dial", "tcp", "169.254.9.2:80")
		for _, a := range sends {
			host.expectOK(t, "nobody", nobody, "send", "", a)
		}
	})

	t.Run("0.0.0.0/0 and ::/0 reach the world", func(t *testing.T) {
		host.expectOK(t, "agent 1", agent1, "dial", "tcp", "10.99.0.2:80")
		host.expectOK(t, "agent 1", agent1, "dial", "tcp6", "[fd99::2]:80")
	})

	t.Run("0.0.0.0/0 and ::/0 do not reach the host", func(t *testing.T) {
		for _, l := range own {
			host.expectRefused(t, "agent 1", agent1, "dial", l.network, l.addr)
		}
		// Link-local is refused on the peer too: 169.254.169.254 is where
		// clouds serve instance credentials.
		host.expectRefused(t, "agent 1", agent1, "dial", "tcp", "169.254.9.2:80")
		host.expectRefused(t, "agent 1", agent1, "dial", "tcp6", "[fe80::2%wa]:80")
		for _, a := range sends {
			host.expectRefused(t, "agent 1", agent1, "send", "", a)
		}
	})

	t.Run("an explicit loopback allowance reaches exactly its port", func(t *testing.T) {
		host.expectOK(t, "agent 2", agent2, "dial", "tcp", "127.0.0.1:7002")
		host.expectRefused(t, "agent 2", agent2, "dial", "tcp", "127.0.0.1:7003")
		host.expectRefused(t, "agent 2", agent2, "dial", "tcp", "127.0.0.1:7001")
		host.expectRefused(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:7002")
		host.expectOK(t, "agent 2", agent2, "dial", "tcp", "10.99.0.2:80")
	})
}

// TestKernelThousandAgents: the whole table for 1000 agents with two
// allowances each (one wide, one explicit) goes to the kernel in one batch
// and reads back as sent; the rule count stays linear.
func TestKernelThousandAgents(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)
	f := &spec.Flock{UIDBase: uidBase, Bus: spec.Bus{Host: "127.0.0.1", Port: 4222}}
	for id := 1; id <= 1000; id++ {
		f.Agents = append(f.Agents, spec.Agent{ID: id, Egress: []spec.Egress{
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Port: 443, Proto: "tcp"},
			{Prefix: netip.MustParsePrefix(fmt.Sprintf("127.0.%d.%d/32", id/256, id%256)), Port: 8080, Proto: "tcp"},
		}})
	}
	p := ForFlock(f)
	rs, err := build(p)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := len(rs.rules[Chain]), 1+2*1000+3; n != want {
		t.Errorf("%d rules for 1000 agents with 2 allowances each, want %d", n, want)
	}
	start := time.Now()
	if err := fw.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	ensured := time.Since(start)
	start = time.Now()
	if ok, err := fw.Matches(ctx, p); !ok || err != nil {
		t.Fatalf("Matches = %v, %v after Ensure", ok, err)
	}
	t.Logf("1000 agents × 2 allowances: Ensure %v, Matches %v", ensured.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
