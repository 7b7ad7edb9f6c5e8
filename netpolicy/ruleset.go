package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/spec"
)

// ruleset is table inet flock as nftables objects: what Ensure sends, what
// Matches reads back, what Render prints. Built here from a Policy, or read
// from the kernel in nft.go; the renderer treats both alike, so comparing
// their renderings is comparing the tables.
type ruleset struct {
	table  *nftables.Table
	objs   []*nftables.NamedObj
	sets   []*nftables.Set
	elems  map[string][]nftables.SetElement // by set name
	chains []*nftables.Chain
	rules  map[string][]*nftables.Rule // by chain name, in chain order
}

// appender adds rules to chain ch, in order, each with its comment and its
// expressions joined.
func (rs *ruleset) appender(ch *nftables.Chain) func(comment string, exprs ...[]expr.Any) {
	return func(comment string, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		rs.rules[ch.Name] = append(rs.rules[ch.Name], &nftables.Rule{
			Table: rs.table, Chain: ch, Exprs: all,
			UserData: userdata.AppendString(nil, userdata.TypeComment, comment),
		})
	}
}

// The rules, in chain order, for packets whose socket belongs to an agent:
//
//  0. a new connection (tcp syn) to the bus or to Proxy beyond the
//     agent's connect rate (ConnectRate a second after a burst of twice
//     as many, a token bucket per uid in set connectrate): counted per
//     uid (set refused) and reset, so connect() fails at once and the
//     service never sees it;
//  1. to the bus (BusHost, tcp BusPort): beyond the agent's send rate
//     (SendRate bytes a second after a burst of SendBurst, a token bucket
//     per uid in set sendrate): counted per uid (set refused) and
//     dropped, so TCP holds the rest back and sends it again later (the
//     connection stays); within it: accept;
//     in a multi-host flock, then, tcp to the cluster port of the flock's
//     hosts (sets cluster_peers4/6) or of this host (a fib type in set
//     hosttypes): counted, logged and reset as in 3 and 4, before any
//     allowance can let it through: only the bus talks to the other hosts
//     (addClusterRefusals);
//  2. each allowance: accept, for its own uid only; a wide one (a range
//     such as 0.0.0.0/0 or 10.0.0.0/8) only when the destination is not
//     this host: not in set host4/host6 (loopback, link-local, multicast)
//     and not of a fib address type in set hosttypes (the kernel's answer,
//     at packet time, to "is this one of my addresses or a broadcast?");
//  3. anything else: count (named counter "denied", and per uid in set
//     refused), log at most 5/minute per uid with the socket's uid in the
//     line (log flags skuid; the per-uid limit lives in set denylog, what
//     was logged is counted per uid in set logged), then
//  4. tcp: reject with a reset, so connect() fails at once with ECONNREFUSED;
//  5. the rest (udp including DNS, icmp, both IP versions): reject with
//     icmpx admin-prohibited; the sending syscall itself gets EPERM.
//
// The chain's policy is accept: packets of other uids, and packets with no
// socket (forwarded, kernel-made RSTs and ICMP), are not ours to judge;
// `meta skuid` does not match them, so none of these rules applies.
//
// Replies an agent's listening socket sends (a SYN-ACK, a UDP answer) carry
// the agent's uid too and are denied like any other packet: agents cannot
// serve each other, or anyone, over loopback. That is also why there is no
// blanket "ct state established accept": the bus connection needs none,
// because every packet the agent sends on it goes to BusPort.
//
// Why agents need no input hook: every packet an agent's socket emits (the
// connections it opens, the answers of the ones it listens on) passes this
// output hook with the socket's uid, so output alone stops any two-way
// exchange outside the bus and the allowances, and agent-to-agent traffic is
// stopped at the sender. On input the kernel has not looked up the receiving
// socket yet (`meta skuid` there only sees early-demuxed, already
// established sockets), so an input rule could only judge by address or port,
// which would be judging the host's own traffic. What remains is one-way:
// a non-agent sender (a host process, a remote host) can deliver datagrams
// to a UDP port an agent bound, but the agent cannot answer; keeping
// strangers out of the host is the host firewall's job, with one exception
// that is flock's own: the bus's cluster port (addCluster).
func build(p Policy) (*ruleset, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.canonical()
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: Table}
	rs := &ruleset{
		table: t,
		objs:  []*nftables.NamedObj{{Table: t, Name: DeniedCounter, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}}},
		sets: []*nftables.Set{{
			Table: t, Name: AgentsSet, KeyType: nftables.TypeUID,
			// Host byte order, as nft itself declares uid sets: without it
			// nft prints (and parses, e.g. in `nft delete element`) the
			// uids byte-swapped. Filtering does not depend on it.
			KeyByteOrder: binaryutil.NativeEndian,
			ID:           setIDs[AgentsSet],
		}, {
			Table: t, Name: Host4Set, KeyType: nftables.TypeIPAddr, Interval: true, ID: setIDs[Host4Set],
		}, {
			Table: t, Name: Host6Set, KeyType: nftables.TypeIP6Addr, Interval: true, ID: setIDs[Host6Set],
		}, {
			// fib writes the type in host byte order, as nft declares it.
			Table: t, Name: HostTypesSet, KeyType: nftables.TypeFIBAddr, KeyByteOrder: binaryutil.NativeEndian, ID: setIDs[HostTypesSet],
		},
			uidSet(t, RefusedSet, 0), uidSet(t, DenyLogSet, time.Minute), uidSet(t, LoggedSet, 0),
		},
		elems: map[string][]nftables.SetElement{},
		chains: []*nftables.Chain{{
			Table: t, Name: Chain, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter,
			Policy: ref(nftables.ChainPolicyAccept),
		}},
		rules: map[string][]*nftables.Rule{},
	}
	for _, uid := range p.AgentUIDs {
		// meta skuid loads the uid in host byte order, so the set keys are too.
		rs.elems[AgentsSet] = append(rs.elems[AgentsSet], nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uid)})
	}
	rs.elems[Host4Set], rs.elems[Host6Set] = hostElements()
	for _, typ := range hostTypes {
		rs.elems[HostTypesSet] = append(rs.elems[HostTypesSet], nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(typ)})
	}
	ch := rs.chains[0]
	add := rs.appender(ch)
	agents := skuidInAgents(rs.sets[0])

	bus := func() []expr.Any {
		return slices.Concat(agents, daddr(netip.PrefixFrom(p.BusHost, p.BusHost.BitLen())), l4("tcp"), dport(p.BusPort))
	}
	if p.ConnectRate > 0 {
		rs.sets = append(rs.sets, uidSet(t, ConnectSet, time.Minute))
		add("bus: a new connection beyond the agent's connect rate, reset", bus(), syn(), overConnectRate(p.ConnectRate))
		if p.Proxy.IsValid() {
			add("proxy: a new connection beyond the agent's connect rate, reset", agents,
				daddr(netip.PrefixFrom(p.Proxy.Addr(), p.Proxy.Addr().BitLen())), l4("tcp"), dport(p.Proxy.Port()), syn(), overConnectRate(p.ConnectRate))
		}
	}
	if p.SendRate > 0 {
		rs.sets = append(rs.sets, uidSet(t, SendRateSet, time.Minute))
		add("bus: beyond the agent's send rate, held back", bus(), overSendRate(p.SendRate))
	}
	add("bus", bus(), accept())
	if p.Cluster != nil {
		addClusterSets(rs, p.Cluster)
		addClusterRefusals(add, agents, p.Cluster.Port)
	}
	for _, uid := range sortedKeys(p.Egress) {
		for _, a := range p.Egress[uid] {
			var port []expr.Any
			if a.Port != 0 {
				port = dport(a.Port)
			}
			var guard []expr.Any
			comment := fmt.Sprintf("egress of uid %d", uid)
			if spec.Wide(a.Prefix) {
				guard, comment = notHost(a.Prefix.Addr().Is6()), comment+", outside this host"
			}
			add(comment, skuidIs(uid), daddr(a.Prefix), guard, l4(a.Proto), port, accept())
		}
	}
	add("deny: count, log", agents, countAndLog())
	add("deny tcp: reset", agents, l4("tcp"), reset())
	add("deny the rest: admin-prohibited; flock policy "+p.Hash(), agents, []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	})
	if p.Cluster != nil {
		addCluster(rs, p.Cluster)
	}
	return rs, nil
}

// countAndLog is what every refusal of an agent's packet does before its
// reject: count it (named counter denied), count it for its uid; then the
// log limit, one token bucket per uid (an element of denylog, made by the
// first refusal and expiring after a minute of quiet, by when its bucket
// would be full again anyway): a packet over its own uid's limit ends the
// rule and falls through to the reject that follows, so one agent's flood
// cannot spend another's log budget. Packets that pass are counted as
// logged, then logged, the uid in the line.
func countAndLog() []expr.Any {
	var out []expr.Any
	out = append(out, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: DeniedCounter})
	out = append(out, perUID(RefusedSet, &expr.Counter{})...)
	out = append(out, perUID(DenyLogSet, &expr.Limit{Type: expr.LimitTypePkts, Rate: logRate, Unit: expr.LimitTimeMinute, Burst: logBurst})...)
	out = append(out, perUID(LoggedSet, &expr.Counter{})...)
	return append(out, &expr.Log{
		Key:   1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_LEVEL | 1<<unix.NFTA_LOG_FLAGS,
		Data:  []byte(LogPrefix),
		Level: expr.LogLevelWarning,
		Flags: expr.LogFlagsUID, // "UID=... GID=..." in the line names the agent
	})
}

// overSendRate drops a packet beyond its uid's send rate, counting it
// among the uid's refused packets (what flock-counters reports): the
// element of set sendrate is made by the uid's first packet and expires
// after a minute of quiet, by when its bucket is full again anyway. A
// packet within the rate ends the rule (a limit over its rate does not
// match) and goes on to the bus's accept. Not logged: the count says it,
// and a log line per held-back packet would be a flood of its own.
func overSendRate(rate uint64) []expr.Any {
	out := perUID(SendRateSet, &expr.Limit{Type: expr.LimitTypePktBytes, Rate: rate, Unit: expr.LimitTimeSecond, Burst: SendBurst, Over: true})
	out = append(out, perUID(RefusedSet, &expr.Counter{})...)
	return append(out, &expr.Verdict{Kind: expr.VerdictDrop})
}

// overConnectRate resets a new connection beyond its uid's connect rate,
// counting it as overSendRate does; its bucket lives in set connectrate.
func overConnectRate(rate uint32) []expr.Any {
	out := perUID(ConnectSet, &expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(rate), Unit: expr.LimitTimeSecond, Burst: 2 * rate, Over: true})
	out = append(out, perUID(RefusedSet, &expr.Counter{})...)
	return append(out, reset()...)
}

// syn matches a tcp packet that opens a connection: syn set, ack not.
func syn() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
	}
}

// reset refuses a tcp packet with a reset: connect() fails at once.
func reset() []expr.Any { return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}} }

// addClusterRefusals keeps agents off the cluster port, whatever their
// allowances say (0.0.0.0/0:*, or a host's address by name): the input
// chain accepts the port from the flock's hosts' addresses, and an agent's
// packets leave from them too. Three destinations, each a count-and-log
// rule then a reset rule, as the refusals at the end of the chain (same
// counters, same log, so status and events name the agent):
//
//   - the other hosts, and this one's listed address: set cluster_peers4,
//   - the same over IPv6: set cluster_peers6,
//   - any address of this host (loopback, another interface's: an agent
//     that binds its socket to the listed address reaches them with a
//     peer's source): fib daddr type in set hosttypes, as the wide
//     allowances' host guard asks.
func addClusterRefusals(add func(string, ...[]expr.Any), agents []expr.Any, port uint16) {
	tcp := append(l4("tcp"), dport(port)...)
	for _, to := range []struct {
		what  string
		match []expr.Any
	}{
		{"the flock's hosts (IPv4)", append(addrIn(false, false), tcp...)},
		{"the flock's hosts (IPv6)", append(addrIn(true, false), tcp...)},
		{"this host", append(slices.Clone(tcp),
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Lookup{SourceRegister: 1, SetName: HostTypesSet, SetID: setIDs[HostTypesSet]})},
	} {
		add("deny the cluster port of "+to.what+": count, log", agents, to.match, countAndLog())
		add("deny the cluster port of "+to.what+": reset", agents, to.match, reset())
	}
}

// addCluster guards the cluster port of a multi-host flock, in a chain of
// its own on the input hook (policy accept: everything else that arrives
// is the host firewall's business, not ours):
//
//  1. tcp to the cluster port from a host of the flock (set cluster_peers4
//     or cluster_peers6): accept;
//  2. tcp to the cluster port from anywhere else: count (named counter
//     cluster_denied), log at most 5/minute (prefix flock-cluster-deny;
//     one budget for all, as no uid tells the senders apart), then
//  3. drop: a stranger learns nothing, not even that the port exists.
//
// The agents are not judged here but on output (addClusterRefusals): their
// packets leave from this host's addresses, listed ones included, so by
// source address they look like the bus's. Judging on input by source
// address is right for everyone else, unlike for the agents (see build):
// the port is the bus's, whoever sends to it.
func addCluster(rs *ruleset, c *Cluster) {
	t := rs.table
	ch := &nftables.Chain{
		Table: t, Name: InputChain, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter,
		Policy: ref(nftables.ChainPolicyAccept),
	}
	rs.chains = append(rs.chains, ch)
	add := rs.appender(ch)
	port := func() []expr.Any { return append(l4("tcp"), dport(c.Port)...) }
	add("cluster: the flock's hosts (IPv4)", addrIn(false, true), port(), accept())
	add("cluster: the flock's hosts (IPv6)", addrIn(true, true), port(), accept())
	add("cluster: others: count, log", port(),
		[]expr.Any{
			&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: ClusterDeniedCounter},
			&expr.Limit{Type: expr.LimitTypePkts, Rate: logRate, Unit: expr.LimitTimeMinute, Burst: logBurst},
			&expr.Log{Key: 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_LEVEL, Data: []byte(ClusterLogPrefix), Level: expr.LogLevelWarning},
		})
	add("cluster: others: drop", port(), []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}})
}

// addClusterSets adds the cluster's counter and its peers' sets, which
// both chains use.
func addClusterSets(rs *ruleset, c *Cluster) {
	t := rs.table
	rs.objs = append(rs.objs, &nftables.NamedObj{Table: t, Name: ClusterDeniedCounter, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	rs.sets = append(rs.sets,
		&nftables.Set{Table: t, Name: ClusterPeers4Set, KeyType: nftables.TypeIPAddr, ID: setIDs[ClusterPeers4Set]},
		&nftables.Set{Table: t, Name: ClusterPeers6Set, KeyType: nftables.TypeIP6Addr, ID: setIDs[ClusterPeers6Set]})
	for _, a := range c.Peers {
		set := ClusterPeers4Set
		if a.Is6() {
			set = ClusterPeers6Set
		}
		rs.elems[set] = append(rs.elems[set], nftables.SetElement{Key: a.AsSlice()})
	}
}

// addrIn matches a source (or destination) address in the cluster peers
// set of its IP version, with the version check an inet table needs first.
func addrIn(v6, source bool) []expr.Any {
	proto, off, n, set := byte(unix.NFPROTO_IPV4), uint32(16), uint32(4), ClusterPeers4Set // ip daddr
	if v6 {
		proto, off, n, set = unix.NFPROTO_IPV6, 24, 16, ClusterPeers6Set // ip6 daddr
	}
	if source {
		off -= n // ip saddr at 12, ip6 saddr at 8
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setIDs[set]},
	}
}

func ref[T any](v T) *T { return &v }

// setIDs are the sets' transaction ids, by which rules in the same batch
// refer to them. Fixed ids keep the batch (and its golden file) stable;
// they only need to be unique inside one batch.
var setIDs = map[string]uint32{AgentsSet: 1, Host4Set: 2, Host6Set: 3, HostTypesSet: 4, RefusedSet: 5, DenyLogSet: 6, LoggedSet: 7,
	ClusterPeers4Set: 8, ClusterPeers6Set: 9, SendRateSet: 10, ConnectSet: 11}

// logRate and logBurst are each agent's log limit on its denied packets:
// per minute, and at once.
const logRate, logBurst = 5, 5

// dynSetSize is the element limit nft gives a dynamic set when none is
// named; only agent uids ever reach these sets, so it is never near.
const dynSetSize = 65535

// uidSet is a set of uids the packet path fills (flags dynamic), each
// element carrying the state of the statement that made it (a counter, a
// limit); with a timeout, an element idle that long is dropped.
func uidSet(t *nftables.Table, name string, timeout time.Duration) *nftables.Set {
	return &nftables.Set{
		Table: t, Name: name, KeyType: nftables.TypeUID, KeyByteOrder: binaryutil.NativeEndian,
		Dynamic: true, HasTimeout: timeout != 0, Timeout: timeout, Size: dynSetSize, ID: setIDs[name],
	}
}

// perUID is `update @set { meta skuid stmt }`: the packet's uid is added
// to set (if not there yet) and stmt, which the element keeps, is
// evaluated; a limit over its rate ends the rule.
func perUID(set string, stmt expr.Any) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Dynset{SrcRegKey: 1, SetName: set, SetID: setIDs[set], Operation: unix.NFT_DYNSET_OP_UPDATE, Exprs: []expr.Any{stmt}},
	}
}

// hostTypes are the fib address types of destinations that are this host:
// its own addresses on any interface (local), IPv4 broadcasts, which the
// kernel loops back to the host's own sockets (and 0.0.0.0/8), and IPv6
// anycast addresses the host answers itself. Asking the kernel per packet
// keeps the rule true when the host's addresses change; multicast needs no
// type, its ranges are in the host sets.
var hostTypes = []uint32{unix.RTN_LOCAL, unix.RTN_BROADCAST, unix.RTN_ANYCAST}

// hostElements are spec.HostBlocks as interval-set elements, the way nft
// writes them: an interval end at the zero address first, then each
// range's start and the address after its end (none when the range runs
// to the top of the address space).
func hostElements() (v4, v6 []nftables.SetElement) {
	v4 = []nftables.SetElement{{Key: make([]byte, 4), IntervalEnd: true}}
	v6 = []nftables.SetElement{{Key: make([]byte, 16), IntervalEnd: true}}
	for _, b := range spec.HostBlocks {
		start := b.Prefix.Masked().Addr()
		el := []nftables.SetElement{{Key: start.AsSlice()}}
		if next := lastAddr(b.Prefix).Next(); next.IsValid() {
			el = append(el, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
		if start.Is4() {
			v4 = append(v4, el...)
		} else {
			v6 = append(v6, el...)
		}
	}
	return v4, v6
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(a)
	return last
}

// notHost is the host guard of a wide allowance, after daddr has checked
// the IP version: the destination is in neither the host set of its
// version nor of a host fib type.
func notHost(v6 bool) []expr.Any {
	set, off, n := Host4Set, uint32(16), uint32(4)
	if v6 {
		set, off, n = Host6Set, 24, 16
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setIDs[set], Invert: true},
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Lookup{SourceRegister: 1, SetName: HostTypesSet, SetID: setIDs[HostTypesSet], Invert: true},
	}
}

// The expression helpers below generate what nft itself generates for the
// same statements (checked with `nft --debug=netlink`), so `nft list` prints
// the table back as readable nft syntax.

func skuidInAgents(s *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
	}
}

func skuidIs(uid uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(uid)},
	}
}

// daddr matches the destination prefix, including the IP version check an
// inet table needs before reading an address out of the network header.
// Byte-aligned prefixes load just their bytes; others load the address and
// mask it; /0 is only the version check.
func daddr(p netip.Prefix) []expr.Any {
	proto, off := byte(unix.NFPROTO_IPV4), uint32(16) // ip daddr
	if p.Addr().Is6() {
		proto, off = unix.NFPROTO_IPV6, 24 // ip6 daddr
	}
	out := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
	addr, bits := p.Masked().Addr().AsSlice(), p.Bits()
	switch {
	case bits == 0:
	case bits%8 == 0:
		out = append(out,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(bits / 8)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:bits/8]})
	default:
		n := len(addr)
		out = append(out,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(n)},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(n), Mask: prefixMask(bits, n), Xor: make([]byte, n)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr})
	}
	return out
}

func prefixMask(bits, n int) []byte {
	m := make([]byte, n)
	for i := range m {
		switch {
		case bits >= 8:
			m[i], bits = 0xff, bits-8
		case bits > 0:
			m[i], bits = byte(0xff<<(8-bits)), 0
		}
	}
	return m
}

func l4(proto string) []expr.Any {
	p := byte(unix.IPPROTO_TCP)
	if proto == "udp" {
		p = unix.IPPROTO_UDP
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// dport reads the destination port at the same offset for tcp and udp; the
// caller has matched l4proto first.
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }
