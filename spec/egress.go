package spec

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// An agent's egress is the spec's to say, and so is what follows from it:
// each rule is a name or an address (IsName), address rules are the
// firewall's and names the proxy's (SplitEgress), and an agent with names
// reaches the proxy, at DefaultProxyListen (HasNames). The firewall, the
// proxy, the units and explain all ask here; none decides it again.

// DefaultProxyListen is where flock's egress proxy listens: loopback only,
// beside the bus's 4222. The firewall opens it to the agents with names,
// whose units point HTTPS_PROXY at it.
const DefaultProxyListen = "127.0.0.1:4230"

// ParseEgress reads "ADDR[/BITS]:PORT[/PROTO]" ("[V6[/BITS]]:PORT" for
// IPv6); PORT may be * for any, PROTO is tcp (the default) or udp. It
// also reads "NAME:PORT" and "*.DOMAIN:PORT", carried by the proxy.
func ParseEgress(s string) (Egress, error) {
	bad := func(why string) (Egress, error) {
		return Egress{}, fmt.Errorf("%q %s; write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443, or a name, %s", s, why, nameExample)
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		if strings.EqualFold(scheme, "http") {
			return Egress{}, fmt.Errorf("%q is plain HTTP, which the proxy does not carry: without TLS it cannot check which name the client reaches; write the https name with its port, %s", s, nameExample)
		}
		return bad("has a scheme; write the name and port alone")
	}
	e := Egress{Proto: "tcp"}
	rest := s
	if i := strings.LastIndex(rest, "/"); i > strings.LastIndexAny(rest, ":]") {
		e.Proto, rest = rest[i+1:], rest[:i]
		if e.Proto != "tcp" && e.Proto != "udp" {
			return bad("has protocol " + strconv.Quote(e.Proto) + ", not tcp or udp")
		}
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return bad("has no port")
	}
	host, port := rest[:i], rest[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return bad("is an IPv6 address without brackets")
	}
	if isNameish(host) {
		return parseNameRule(s, host, port, e.Proto)
	}
	if port != "*" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return bad("has port " + strconv.Quote(port) + ", not 1-65535 or *")
		}
		e.Port = uint16(p)
	}
	if strings.Contains(host, "/") {
		pfx, err := netip.ParsePrefix(host)
		if err != nil {
			return bad("is not an address or CIDR")
		}
		if pfx.Masked() != pfx {
			return bad("has host bits set in its CIDR; write " + pfx.Masked().String())
		}
		e.Prefix = pfx
		return e, nil
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" {
		return bad("is not an address")
	}
	addr = addr.Unmap()
	if addr.IsUnspecified() {
		// connect() to 0.0.0.0 or :: reaches this host's loopback.
		e.Prefix = netip.PrefixFrom(addr, 0)
		return Egress{}, fmt.Errorf("%q is the unspecified address, which the kernel sends to this host itself; write the address to reach, or %s for any address outside this host", s, e)
	}
	e.Prefix = netip.PrefixFrom(addr, addr.BitLen())
	return e, nil
}

// String writes e the way a spec does.
func (e Egress) String() string {
	if e.IsName() {
		return e.Name + ":" + strconv.Itoa(int(e.Port))
	}
	host := e.Prefix.String()
	if e.Prefix.IsSingleIP() {
		host = e.Prefix.Addr().String()
	}
	if e.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	port := "*"
	if e.Port != 0 {
		port = strconv.Itoa(int(e.Port))
	}
	return host + ":" + port + "/" + e.Proto
}

// IsName says whether e names a host (carried by the proxy) rather than
// an address (opened in the firewall).
func (e Egress) IsName() bool { return e.Name != "" }

// SplitEgress is eg by who carries each rule, each half in eg's order:
// addrs, the address rules, which the firewall opens; names, the name
// rules, which the proxy carries. Neither is nil.
func SplitEgress(eg []Egress) (addrs, names []Egress) {
	addrs, names = []Egress{}, []Egress{}
	for _, e := range eg {
		if e.IsName() {
			names = append(names, e)
		} else {
			addrs = append(addrs, e)
		}
	}
	return addrs, names
}

// HasNames says whether agent a has a name rule, so reaches the proxy.
func (a Agent) HasNames() bool {
	_, names := SplitEgress(a.Egress)
	return len(names) > 0
}
