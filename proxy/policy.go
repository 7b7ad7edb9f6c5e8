package proxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Policy is who may reach what through the proxy: each agent's uid and its
// egress rules (names and addresses). It is replaced whole on reload; a
// tunnel already open keeps the decision it was opened with.
type Policy struct {
	Agents map[uint32]AgentRules // by uid
}

// AgentRules are one agent's egress rules, and its shares of the proxy
// (spec.Shares; 0: no bound).
type AgentRules struct {
	ID         int
	Rules      []spec.Egress
	Tunnels    int
	Handshakes int
}

// ForFlock is the proxy's policy for a spec: every agent with at least one
// name rule or a model API granted (the others never reach the proxy: the
// firewall does not let them). Pure.
func ForFlock(f *spec.Flock) Policy {
	p := Policy{Agents: map[uint32]AgentRules{}}
	for _, a := range f.Agents {
		if a.NeedsProxy() {
			p.Agents[f.UID(a.ID)] = AgentRules{ID: a.ID, Rules: a.Egress, Tunnels: a.Shares.Tunnels, Handshakes: a.Shares.Handshakes}
		}
	}
	return p
}

// Reasons a decision records (REASON=); a denial's body explains them.
const (
	ReasonAllowed     = "allowed"
	ReasonNotAgent    = "not-an-agent"
	ReasonNotConnect  = "not-connect"
	ReasonBadTarget   = "bad-target"
	ReasonNoRule      = "no-rule"
	ReasonIPLiteral   = "ip-literal"
	ReasonNoAddress   = "no-address"
	ReasonPrivateAddr = "resolves-to-private"
	ReasonSNIMismatch = "sni-mismatch"
	ReasonNotTLS      = "not-tls"
	ReasonDialFailed  = "dial-failed"
	// A request on a connection intercepted for a secret (package
	// secrets), refused with a 403: outside the secret's rules, or
	// carrying a placeholder toward a host its secret is not bound to.
	ReasonSecretRule    = wire.SecretRefusedRule
	ReasonSecretUnbound = wire.SecretRefusedUnbound
	// Over a share (spec shares.tunnels, shares.handshakes): refused at
	// once; the bus counts each as a violation of the agent's.
	ReasonTunnels    = wire.EgressOverTunnels
	ReasonHandshakes = wire.EgressOverHandshakes
)

// specialBlocks are what a public name must not resolve into unless one of
// the agent's address rules names it: this host, its networks and the
// cloud metadata service (DNS rebinding).
var specialBlocks = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), // 169.254.169.254, metadata
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/3"), // multicast and reserved
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

func special(a netip.Addr) bool {
	for _, b := range specialBlocks {
		if b.Contains(a) {
			return true
		}
	}
	return false
}

// addrAllowed says whether one of rules (an address rule) lets the agent
// reach addr on port over tcp the way the firewall would let it connect
// there itself: a rule naming the address or a range of it explicitly, or
// a wide one (0.0.0.0/0, 10.0.0.0/8), which means "outside this host" and
// so never covers a host block or one of this host's addresses (local).
// It runs for every CONNECT and resolved address, so it asks each rule's
// kind (spec's IsName) instead of splitting them (SplitEgress allocates).
func addrAllowed(rules []spec.Egress, addr netip.Addr, port uint16, local func(netip.Addr) bool) bool {
	for _, r := range rules {
		if r.IsName() || r.Proto != "tcp" || (r.Port != 0 && r.Port != port) || !r.Prefix.Contains(addr) {
			continue
		}
		if !spec.Wide(r.Prefix) {
			return true
		}
		if _, host := spec.InHostBlock(netip.PrefixFrom(addr, addr.BitLen())); !host && (local == nil || !local(addr)) {
			return true
		}
	}
	return false
}

func nameAllowed(rules []spec.Egress, name string, port uint16) bool {
	for _, r := range rules {
		if r.MatchName(name, port) {
			return true
		}
	}
	return false
}

// Target is what a CONNECT asks for, split and checked: a host (a name in
// lower case, or an address) and a port.
type Target struct {
	Host string
	Addr netip.Addr // valid if Host is an IP literal
	Port uint16
}

func (t Target) String() string {
	if t.Addr.Is6() {
		return "[" + t.Host + "]:" + strconv.Itoa(int(t.Port))
	}
	return t.Host + ":" + strconv.Itoa(int(t.Port))
}

// ParseTarget reads a CONNECT's authority, "host:port" or "[v6]:port".
func ParseTarget(s string) (Target, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return Target{}, fmt.Errorf("%q has no port", s)
	}
	host, port := s[:i], s[i+1:]
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return Target{}, fmt.Errorf("%q has port %q, not 1-65535", s, port)
	}
	t := Target{Port: uint16(p)}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || a.Zone() != "" {
			return Target{}, fmt.Errorf("%q is not an address", s)
		}
		a = a.Unmap()
		t.Addr, t.Host = a, a.String()
		return t, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		t.Addr, t.Host = a.Unmap(), a.Unmap().String()
		return t, nil
	}
	// The spec's own check of a name: the same grammar a rule has.
	if _, err := spec.ParseEgress(host + ":443"); err != nil || strings.HasPrefix(host, "*") || host == "" {
		return Target{}, fmt.Errorf("%q is not a host name", host)
	}
	t.Host = strings.ToLower(host)
	return t, nil
}

// Decision is what the proxy does with one CONNECT before resolving: the
// agent it is, allow or not, and why.
type Decision struct {
	Agent  int // 0: not an agent
	Allow  bool
	Reason string
}

// Decide applies p to a CONNECT from uid to t; local says whether an
// address is this host's (nil: none is). Pure but for local.
func (p Policy) Decide(uid uint32, t Target, local func(netip.Addr) bool) Decision {
	a, ok := p.Agents[uid]
	if !ok {
		return Decision{Reason: ReasonNotAgent}
	}
	d := Decision{Agent: a.ID, Reason: ReasonAllowed, Allow: true}
	if t.Addr.IsValid() {
		if !addrAllowed(a.Rules, t.Addr, t.Port, local) {
			d.Allow, d.Reason = false, ReasonIPLiteral
		}
		return d
	}
	if !nameAllowed(a.Rules, t.Host, t.Port) {
		d.Allow, d.Reason = false, ReasonNoRule
	}
	return d
}

// Addrs keeps the addresses a name resolved to that agent uid may reach:
// none in specialBlocks, and none of this host's own (local), unless one
// of its address rules names it. The proxy dials only these (DNS
// rebinding): an allowed name whose owner points it at this host's public
// address must not reach a service the host runs there.
func (p Policy) Addrs(uid uint32, resolved []netip.Addr, port uint16, local func(netip.Addr) bool) []netip.Addr {
	a := p.Agents[uid]
	var out []netip.Addr
	for _, r := range resolved {
		r = r.Unmap()
		if !(special(r) || (local != nil && local(r))) || addrAllowed(a.Rules, r, port, local) {
			out = append(out, r)
		}
	}
	return out
}
