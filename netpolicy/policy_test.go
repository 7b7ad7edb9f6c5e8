package netpolicy

// Tier: unit.

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
)

func egress(s string, port uint16, proto string) spec.Egress {
	return spec.Egress{Prefix: netip.MustParsePrefix(s), Port: port, Proto: proto}
}

func allow(s string, port uint16, proto string) Allow {
	return Allow{Prefix: netip.MustParsePrefix(s), Port: port, Proto: proto}
}

func TestForFlock(t *testing.T) {
	const base = spec.DefaultUIDBase
	loop := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name string
		f    spec.Flock
		want Policy
	}{{
		name: "no agents",
		f:    spec.Flock{UIDBase: base, Bus: spec.Bus{Host: "127.0.0.1", Port: 4222}},
		want: Policy{BusHost: loop, BusPort: 4222, Egress: map[uint32][]Allow{}},
	}, {
		name: "two agents, no egress",
		f: spec.Flock{UIDBase: base, Bus: spec.Bus{Host: "127.0.0.1", Port: 4222},
			Agents: []spec.Agent{{ID: 1}, {ID: 2}}},
		want: Policy{AgentUIDs: []uint32{base + 1, base + 2}, BusHost: loop, BusPort: 4222, Egress: map[uint32][]Allow{}},
	}, {
		name: "egress lands on its own uid, sorted, deduplicated",
		f: spec.Flock{UIDBase: base, Bus: spec.Bus{Host: "127.0.0.1", Port: 4222},
			Agents: []spec.Agent{
				{ID: 7, Egress: []spec.Egress{egress("2001:db8::/64", 0, "udp"), egress("10.1.2.3/32", 443, "tcp"), egress("10.1.2.3/32", 443, "tcp")}},
				{ID: 3},
			}},
		want: Policy{AgentUIDs: []uint32{base + 3, base + 7}, BusHost: loop, BusPort: 4222,
			Egress: map[uint32][]Allow{base + 7: {allow("10.1.2.3/32", 443, "tcp"), allow("2001:db8::/64", 0, "udp")}}},
	}, {
		name: "own uid base, IPv6 bus",
		f: spec.Flock{UIDBase: 50000, Bus: spec.Bus{Host: "::1", Port: 4333},
			Agents: []spec.Agent{{ID: 0}, {ID: 65535}}},
		want: Policy{AgentUIDs: []uint32{50000, 50000 + 65535}, BusHost: netip.IPv6Loopback(), BusPort: 4333, Egress: map[uint32][]Allow{}},
	}, {
		name: "host bits masked, IPv4-mapped prefixes unmapped",
		f: spec.Flock{UIDBase: base, Bus: spec.Bus{Host: "::ffff:127.0.0.1", Port: 4222},
			Agents: []spec.Agent{{ID: 1, Egress: []spec.Egress{egress("10.9.8.7/8", 53, "udp"), egress("::ffff:192.0.2.1/120", 0, "tcp")}}}},
		want: Policy{AgentUIDs: []uint32{base + 1}, BusHost: loop, BusPort: 4222,
			Egress: map[uint32][]Allow{base + 1: {allow("10.0.0.0/8", 53, "udp"), allow("192.0.2.0/24", 0, "tcp")}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := ForFlock(&tc.f)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ForFlock:\n got %#v\nwant %#v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Policy{AgentUIDs: []uint32{10}, BusHost: netip.MustParseAddr("127.0.0.1"), BusPort: 4222}
	for _, tc := range []struct {
		name   string
		change func(*Policy)
		want   string // substring of the error; "" means valid
	}{
		{"valid", func(p *Policy) {}, ""},
		{"bus host not an IP literal", func(p *Policy) {
			*p = ForFlock(&spec.Flock{Bus: spec.Bus{Host: "localhost", Port: 4222}})
		}, "bus address is not set"},
		{"unspecified bus", func(p *Policy) { p.BusHost = netip.IPv4Unspecified() }, "not one host's address"},
		{"no bus port", func(p *Policy) { p.BusPort = 0 }, "bus port"},
		{"egress of a non-agent", func(p *Policy) { p.Egress = map[uint32][]Allow{11: {allow("10.0.0.1/32", 1, "tcp")}} }, "not an agent uid"},
		{"egress without prefix", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {{Port: 1, Proto: "tcp"}}} }, "no destination prefix"},
		{"egress to 0.0.0.0", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {allow("0.0.0.0/32", 1, "tcp")}} }, "unspecified address"},
		{"egress to ::", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {allow("::/128", 1, "tcp")}} }, "unspecified address"},
		{"egress to ::ffff:0.0.0.0", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {allow("::ffff:0.0.0.0/128", 1, "tcp")}} }, "unspecified address"},
		{"egress to 0.0.0.0/0", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {allow("0.0.0.0/0", 1, "tcp")}} }, ""},
		{"egress of icmp", func(p *Policy) { p.Egress = map[uint32][]Allow{10: {allow("10.0.0.1/32", 0, "icmp")}} }, "neither tcp nor udp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.change(&p)
			err := p.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func TestHashIgnoresOrderNotContent(t *testing.T) {
	a := Policy{AgentUIDs: []uint32{2, 1}, BusHost: netip.MustParseAddr("127.0.0.1"), BusPort: 4222,
		Egress: map[uint32][]Allow{1: {allow("10.0.0.2/32", 1, "tcp"), allow("10.0.0.1/32", 1, "TCP")}}}
	b := Policy{AgentUIDs: []uint32{1, 2, 2}, BusHost: netip.MustParseAddr("127.0.0.1"), BusPort: 4222,
		Egress: map[uint32][]Allow{1: {allow("10.0.0.1/32", 1, "tcp"), allow("10.0.0.2/32", 1, "tcp")}, 2: nil}}
	if a.Hash() != b.Hash() {
		t.Errorf("same policy, different hashes:\n%s\n%s", a, b)
	}
	c := b
	c.BusPort = 4223
	if c.Hash() == b.Hash() {
		t.Errorf("different bus port, same hash")
	}
}

// A name rule is the proxy's to carry: the firewall opens the proxy's
// port to that agent, and nothing else for the name.
func TestForFlockLeavesNamesToTheProxy(t *testing.T) {
	name, err := spec.ParseEgress("api.example.com:443")
	if err != nil {
		t.Fatal(err)
	}
	f := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: 4222}, UIDBase: 1000,
		Agents: []spec.Agent{{ID: 1, Egress: []spec.Egress{name, egress("10.1.2.3/32", 443, "tcp")}}}}
	p := ForFlock(f)
	want := []Allow{{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Port: 443, Proto: "tcp"}, {Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 4230, Proto: "tcp"}}
	if got := p.Egress[1001]; !reflect.DeepEqual(got, want) {
		t.Errorf("egress of uid 1001 = %+v, want %+v (its address rule and the proxy)", got, want)
	}
}

// An agent granted a model API reaches the proxy (the gateway is at its
// address), and nothing more for it; an agent with neither does not.
func TestForFlockOpensTheGatewayToGrantedAgents(t *testing.T) {
	f := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: 4222}, UIDBase: 1000,
		Agents: []spec.Agent{{ID: 1, Models: []spec.Grant{{Provider: "anthropic"}}}, {ID: 2}}}
	p := ForFlock(f)
	want := []Allow{{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 4230, Proto: "tcp"}}
	if got := p.Egress[1001]; !reflect.DeepEqual(got, want) {
		t.Errorf("egress of uid 1001 = %+v, want %+v (the proxy alone)", got, want)
	}
	if got := p.Egress[1002]; len(got) != 0 {
		t.Errorf("egress of uid 1002 = %+v, want none", got)
	}
}
