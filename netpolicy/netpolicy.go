// Package netpolicy owns flock's nftables table, inet flock: agent sockets
// (matched by their uid) may reach the bus and their spec's allowances, and
// nothing else; in a multi-host flock, only the flock's hosts reach the
// bus's cluster port. It never touches another table.
//
// The package is one OS boundary behind the small Firewall interface: NFT
// talks netlink to the kernel, Fake keeps the policy in memory for planner
// tests. Everything else here (Policy, ForFlock, Render) is pure.
package netpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/flockrun/flock/spec"
)

// Names inside the table. They are part of what Matches compares, and the
// log prefix is what operators grep for.
const (
	Table         = "flock"       // the only nftables table flock creates (family inet)
	Chain         = "output"      // the output-hook filter chain
	AgentsSet     = "agents"      // set of agent uids (type uid)
	Host4Set      = "host4"       // IPv4 host blocks (spec.HostBlocks), refused by wide allowances
	Host6Set      = "host6"       // IPv6 host blocks
	HostTypesSet  = "hosttypes"   // fib address types that are this host (local, broadcast, anycast)
	DeniedCounter = "denied"      // named counter of every denied agent packet
	RefusedSet    = "refused"     // per agent uid: counter of its denied packets
	DenyLogSet    = "denylog"     // per agent uid: the limit on logging its denied packets
	LoggedSet     = "logged"      // per agent uid: counter of its denied packets that were logged
	SendRateSet   = "sendrate"    // per agent uid: the limit on the bytes it sends to the bus (Policy.SendRate)
	ConnectSet    = "connectrate" // per agent uid: the limit on its new connections to the bus and the proxy (Policy.ConnectRate)
	LogPrefix     = "flock-deny " // kernel log prefix of denied agent packets
)

// Names of the multi-host part of the table (Policy.Cluster): present only
// in a multi-host flock.
const (
	InputChain           = "input"               // the input-hook filter chain guarding the cluster port
	ClusterPeers4Set     = "cluster_peers4"      // IPv4 addresses of the flock's hosts
	ClusterPeers6Set     = "cluster_peers6"      // IPv6 addresses of the flock's hosts
	ClusterDeniedCounter = "cluster_denied"      // named counter of connections to the cluster port from elsewhere
	ClusterLogPrefix     = "flock-cluster-deny " // kernel log prefix of those
)

// Policy is the desired table as plain data. The zero value of every field
// is meaningful except BusHost and BusPort, which must be set.
type Policy struct {
	AgentUIDs []uint32   // sockets of these uids are filtered; order does not matter
	BusHost   netip.Addr // address of the bus, e.g. 127.0.0.1 or ::1
	BusPort   uint16     // tcp port of the bus
	// Egress allowances per uid. Every key must also be in AgentUIDs.
	Egress map[uint32][]Allow
	// Cluster, in a multi-host flock, lets the flock's hosts reach the
	// bus's cluster port and nobody else; nil on one host (no input chain).
	Cluster *Cluster
	// SendRate is how many bytes a second each agent's sockets together
	// may send to the bus, after a burst of SendBurst; the packets beyond
	// are dropped, and TCP sends them again later (spec Bus.SendRate).
	// 0: no limit.
	SendRate uint64
	// ConnectRate is how many new connections a second each agent may
	// open to the bus and to Proxy, after a burst of twice as many; the
	// connection beyond is refused with a reset (spec Bus.ConnectRate).
	// 0: no limit.
	ConnectRate uint32
	// Proxy is flock-proxy's address, when an agent may reach it (its
	// egress allowance is in Egress); ConnectRate holds there too.
	Proxy netip.AddrPort
}

// SendBurst is what an agent may send to the bus at once, beyond its
// SendRate: four of the largest messages.
const SendBurst = 4 * spec.MaxMessage

// Cluster is the cluster port's guard: tcp to Port is accepted from Peers
// and dropped from any other address.
type Cluster struct {
	Port  uint16       // the buses' route port (spec Bus.ClusterPort)
	Peers []netip.Addr // every host's address, this one's included; order does not matter
}

// Allow is one extra destination an agent may reach. A wide one (a range
// not inside a host block, see spec.Wide) reaches only addresses outside
// this host; a single address or a range inside a host block is allowed
// as written.
type Allow struct {
	Prefix netip.Prefix // 10.1.2.3/32, 10.0.0.0/8, 2001:db8::/64; host bits are ignored
	Port   uint16       // 0: any port of Proto
	Proto  string       // "tcp" or "udp"
}

// Firewall is the OS boundary of this package: netlink for real (NFT), Fake
// for planner tests.
type Firewall interface {
	// Ensure replaces table inet flock with p in one atomic batch, whether or
	// not the table exists. Counters restart at zero.
	Ensure(ctx context.Context, p Policy) error
	// Remove deletes table inet flock; absent is not an error.
	Remove(ctx context.Context) error
	// Matches reports whether table inet flock exists and is exactly what p
	// asks for (absent: false, nil).
	Matches(ctx context.Context, p Policy) (bool, error)
	// Current renders table inet flock as the kernel has it (Render's
	// format: equal to Render(p) exactly when Matches(p)); present is
	// false when there is none. What a saved host state records.
	Current(ctx context.Context) (text string, present bool, err error)
	// RulesFor is every rule of table inet flock that applies to packets
	// of uid, in chain order, each as `nft list` prints it (no table:
	// none).
	RulesFor(ctx context.Context, uid uint32) ([]string, error)
	// Refused is, per agent uid with any, how many of its packets the
	// table denied and how many of those it logged since the table was
	// last replaced (no table: none).
	Refused(ctx context.Context) (map[uint32]Refusals, error)
}

// Refusals are one agent's denied packets: Refused counted, Logged of them
// written to the kernel log; the rest were over the agent's own log limit.
type Refusals struct {
	Refused uint64 `json:"refused"`
	Logged  uint64 `json:"logged"`
}

// ForFlock is the policy a spec asks for. Pure. The spec is validated by its
// parser; anything still malformed here (a bus host that is not an IP
// literal, a port out of range) yields a Policy that Validate rejects, so it
// fails at Ensure rather than being silently dropped.
func ForFlock(f *spec.Flock) Policy {
	p := Policy{Egress: map[uint32][]Allow{}}
	if addr, err := netip.ParseAddr(f.Bus.Host); err == nil {
		p.BusHost = addr
	}
	if f.Bus.Port > 0 && f.Bus.Port <= 65535 {
		p.BusPort = uint16(f.Bus.Port)
	}
	p.SendRate, p.ConnectRate = f.Bus.SendRate, uint32(f.Bus.ConnectRate)
	for _, a := range f.Agents {
		uid := f.UID(a.ID)
		p.AgentUIDs = append(p.AgentUIDs, uid)
		addrs, names := spec.SplitEgress(a.Egress)
		for _, e := range addrs {
			p.Egress[uid] = append(p.Egress[uid], Allow{Prefix: e.Prefix, Port: e.Port, Proto: e.Proto})
		}
		if len(names) > 0 || a.HasModels() {
			// The proxy, on loopback, for this agent only: its names,
			// and its model APIs (the gateway, at the same address).
			l := netip.MustParseAddrPort(spec.DefaultProxyListen)
			p.Egress[uid] = append(p.Egress[uid], Allow{Prefix: netip.PrefixFrom(l.Addr(), 32), Port: l.Port(), Proto: "tcp"})
			p.Proxy = l
		}
	}
	if f.Clustered() {
		port, c := f.Bus.ClusterPort, &Cluster{}
		if port == 0 {
			port = spec.DefaultClusterPort
		}
		if port > 0 && port <= 65535 {
			c.Port = uint16(port) // else 0, which Validate rejects
		}
		for _, h := range f.Hosts {
			c.Peers = append(c.Peers, h.Address)
		}
		p.Cluster = c
	}
	return p.canonical()
}

// Validate says what is wrong with p, if anything, in operator terms.
func (p Policy) Validate() error {
	c := p.canonical()
	if !c.BusHost.IsValid() {
		return fmt.Errorf("netpolicy: the bus address is not set (want an IP literal such as 127.0.0.1)")
	}
	if c.BusHost.IsUnspecified() || c.BusHost.IsMulticast() {
		return fmt.Errorf("netpolicy: bus address %s is not one host's address", c.BusHost)
	}
	if c.BusPort == 0 {
		return fmt.Errorf("netpolicy: the bus port is not set")
	}
	if c.Cluster != nil {
		if c.Cluster.Port == 0 {
			return fmt.Errorf("netpolicy: the cluster port is not set (bus.cluster_port, default %d)", spec.DefaultClusterPort)
		}
		if len(c.Cluster.Peers) == 0 {
			return fmt.Errorf("netpolicy: a cluster without hosts: list the hosts' addresses, or leave the cluster out on one host")
		}
		for _, a := range c.Cluster.Peers {
			if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
				return fmt.Errorf("netpolicy: cluster peer %q is not one host's address (want the IP literal of a host in hosts:)", a)
			}
		}
	}
	for _, uid := range sortedKeys(c.Egress) {
		if _, ok := slices.BinarySearch(c.AgentUIDs, uid); !ok {
			return fmt.Errorf("netpolicy: egress allowance for uid %d, which is not an agent uid", uid)
		}
		for _, a := range c.Egress[uid] {
			if !a.Prefix.IsValid() {
				return fmt.Errorf("netpolicy: egress allowance of uid %d has no destination prefix", uid)
			}
			if a.Prefix.IsSingleIP() && a.Prefix.Addr().IsUnspecified() {
				return fmt.Errorf("netpolicy: egress allowance of uid %d to %s: the unspecified address means this host; name the address, or use %s/0 for any address outside this host", uid, a.Prefix.Addr(), a.Prefix.Addr())
			}
			if a.Proto != "tcp" && a.Proto != "udp" {
				return fmt.Errorf("netpolicy: egress allowance of uid %d to %s: protocol %q is neither tcp nor udp", uid, a.Prefix, a.Proto)
			}
		}
	}
	return nil
}

// canonical sorts and deduplicates p so that equal intentions compare (and
// hash, and render) equal: uids sorted, prefixes masked and unmapped
// (::ffff:10.0.0.1 is IPv4 on the wire), allowances sorted, empty egress
// entries dropped.
func (p Policy) canonical() Policy {
	c := Policy{BusHost: p.BusHost.Unmap(), BusPort: p.BusPort, SendRate: p.SendRate, ConnectRate: p.ConnectRate, Egress: map[uint32][]Allow{}}
	if p.Proxy.IsValid() {
		c.Proxy = netip.AddrPortFrom(p.Proxy.Addr().Unmap(), p.Proxy.Port())
	}
	c.AgentUIDs = slices.Clone(p.AgentUIDs)
	slices.Sort(c.AgentUIDs)
	c.AgentUIDs = slices.Compact(c.AgentUIDs)
	for uid, as := range p.Egress {
		var out []Allow
		for _, a := range as {
			out = append(out, Allow{Prefix: canonPrefix(a.Prefix), Port: a.Port, Proto: strings.ToLower(a.Proto)})
		}
		slices.SortFunc(out, compareAllow)
		out = slices.Compact(out)
		if len(out) > 0 {
			c.Egress[uid] = out
		}
	}
	if p.Cluster != nil {
		cl := &Cluster{Port: p.Cluster.Port}
		for _, a := range p.Cluster.Peers {
			cl.Peers = append(cl.Peers, a.Unmap())
		}
		slices.SortFunc(cl.Peers, netip.Addr.Compare)
		cl.Peers = slices.Compact(cl.Peers)
		c.Cluster = cl
	}
	return c
}

func canonPrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() {
		a, bits = a.Unmap(), max(bits-96, 0)
	}
	return netip.PrefixFrom(a, bits).Masked()
}

func compareAllow(a, b Allow) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
		return c
	}
	if c := strings.Compare(a.Proto, b.Proto); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

func sortedKeys(m map[uint32][]Allow) []uint32 {
	ks := make([]uint32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// String is the canonical one-line-per-fact text of p; Hash is taken over it.
func (p Policy) String() string {
	c := p.canonical()
	var b strings.Builder
	fmt.Fprintf(&b, "bus %s\n", netip.AddrPortFrom(c.BusHost, c.BusPort))
	for _, uid := range c.AgentUIDs {
		fmt.Fprintf(&b, "agent %d\n", uid)
	}
	for _, uid := range sortedKeys(c.Egress) {
		for _, a := range c.Egress[uid] {
			fmt.Fprintf(&b, "egress %d %s %s %d\n", uid, a.Proto, a.Prefix, a.Port)
		}
	}
	// A policy without the rates (or a cluster) has no such line, so its
	// text (and hash, and table) is what it was before them.
	if c.SendRate > 0 {
		fmt.Fprintf(&b, "send rate %d\n", c.SendRate)
	}
	if c.ConnectRate > 0 {
		fmt.Fprintf(&b, "connect rate %d\n", c.ConnectRate)
		if c.Proxy.IsValid() {
			fmt.Fprintf(&b, "proxy %s\n", c.Proxy)
		}
	}
	if c.Cluster != nil {
		fmt.Fprintf(&b, "cluster port %d\n", c.Cluster.Port)
		for _, a := range c.Cluster.Peers {
			fmt.Fprintf(&b, "cluster peer %s\n", a)
		}
	}
	return b.String()
}

// rulesetVersion changes whenever the rules generated for a policy change,
// so a table written by an older flockctl is seen as drift and replaced.
//
// v2: wide allowances refuse this host (the host sets and the fib check).
// v3: denied packets are counted, and their logging limited, per uid.
const rulesetVersion = "v3"

// Hash identifies p (and the rule generator's version); it is written into
// the table as a rule comment, where `nft list` shows it.
func (p Policy) Hash() string {
	sum := sha256.Sum256([]byte(rulesetVersion + "\n" + p.String()))
	return hex.EncodeToString(sum[:8])
}
