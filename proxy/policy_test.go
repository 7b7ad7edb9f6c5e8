package proxy

import (
	"net/netip"
	"testing"
)

func TestDecide(t *testing.T) {
	p := Policy{Agents: map[uint32]AgentRules{
		1001: {ID: 1, Rules: rules(t, "api.example.com:443", "*.example.org:8443", "0.0.0.0/0:*", "127.0.0.1:9443", "10.1.0.0/16:443")},
		1002: {ID: 2, Rules: rules(t, "other.example.net:443")},
	}}
	hostAddr := netip.MustParseAddr("192.0.2.10")
	local := func(a netip.Addr) bool { return a == hostAddr }
	for _, c := range []struct {
		uid    uint32
		target string
		reason string
	}{
		{1001, "api.example.com:443", ReasonAllowed},
		{1001, "API.EXAMPLE.COM:443", ReasonAllowed},
		{1001, "api.example.com:8443", ReasonNoRule},
		{1001, "x.example.org:8443", ReasonAllowed},
		{1001, "example.org:8443", ReasonNoRule},
		{1001, "other.example.net:443", ReasonNoRule},
		{1002, "other.example.net:443", ReasonAllowed},
		{1002, "api.example.com:443", ReasonNoRule},
		{1003, "api.example.com:443", ReasonNotAgent},
		// Literals: a wide rule means outside this host, as in the firewall.
		{1001, "8.8.8.8:443", ReasonAllowed},
		{1001, "192.0.2.10:443", ReasonIPLiteral},        // this host's
		{1001, "127.0.0.1:443", ReasonIPLiteral},         // loopback
		{1001, "169.254.169.254:80", ReasonIPLiteral},    // metadata
		{1001, "127.0.0.1:9443", ReasonAllowed},          // named explicitly
		{1001, "10.1.2.3:443", ReasonAllowed},            // a range named
		{1002, "8.8.8.8:443", ReasonIPLiteral},           // no address rule
		{1001, "[::1]:443", ReasonIPLiteral},             // 0.0.0.0/0 is v4 only
		{1001, "[::ffff:127.0.0.1]:9443", ReasonAllowed}, // v4-mapped is v4
	} {
		tg, err := ParseTarget(c.target)
		if err != nil {
			t.Errorf("%s: %v", c.target, err)
			continue
		}
		if d := p.Decide(c.uid, tg, local); d.Reason != c.reason || d.Allow != (c.reason == ReasonAllowed) {
			t.Errorf("uid %d CONNECT %s: %+v, want %s", c.uid, c.target, d, c.reason)
		}
	}
}

// A name's answers into this host or a private network are dropped unless
// an address rule names them; a wide rule does not.
func TestAddrsDropsRebinding(t *testing.T) {
	p := Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "*.example.com:443", "0.0.0.0/0:*", "10.9.8.0/24:443")}}}
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, c := range []struct {
		in   []netip.Addr
		want int
	}{
		{[]netip.Addr{a("127.0.0.1")}, 0},
		{[]netip.Addr{a("169.254.169.254")}, 0},
		{[]netip.Addr{a("::1")}, 0},
		{[]netip.Addr{a("fd00::1")}, 0},
		{[]netip.Addr{a("::ffff:127.0.0.1")}, 0},
		{[]netip.Addr{a("192.168.1.1")}, 1}, // private, not a host block: 0.0.0.0/0 reaches it directly too
		{[]netip.Addr{a("10.9.8.7")}, 1},
		{[]netip.Addr{a("127.0.0.1"), a("93.184.216.34")}, 1},
		{[]netip.Addr{a("93.184.216.34")}, 1},
	} {
		if got := p.Addrs(1001, c.in, 443, nil); len(got) != c.want {
			t.Errorf("Addrs(%v) = %v, want %d", c.in, got, c.want)
		}
	}
	// This host's own public address is dropped though no block holds it,
	// even with 0.0.0.0/0; a rule naming it lets it through.
	hostAddr := a("198.51.100.7")
	local := func(x netip.Addr) bool { return x == hostAddr }
	if got := p.Addrs(1001, []netip.Addr{hostAddr, a("93.184.216.34")}, 443, local); len(got) != 1 || got[0] != a("93.184.216.34") {
		t.Errorf("this host's address kept: %v", got)
	}
	named := Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "*.example.com:443", "198.51.100.7:443")}}}
	if got := named.Addrs(1001, []netip.Addr{hostAddr}, 443, local); len(got) != 1 {
		t.Errorf("this host's address named by a rule dropped: %v", got)
	}
	// Without any address rule, private answers are dropped as well.
	q := Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "*.example.com:443")}}}
	for _, s := range []string{"10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "0.0.0.0", "fe80::1", "224.0.0.1"} {
		if got := q.Addrs(1001, []netip.Addr{a(s)}, 443, nil); len(got) != 0 {
			t.Errorf("%s kept: %v", s, got)
		}
	}
}

// Tier: unit (reads this host's interfaces). Loopback is this host's; a
// documentation address nobody configured is not, mapped or not.
func TestLocalAddrs(t *testing.T) {
	local := LocalAddrs()
	if !local(netip.MustParseAddr("127.0.0.1")) || !local(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Error("127.0.0.1 is not this host's")
	}
	if local(netip.MustParseAddr("192.0.2.77")) {
		t.Error("192.0.2.77 is this host's")
	}
}
