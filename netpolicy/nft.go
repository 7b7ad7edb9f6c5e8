package netpolicy

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NFT is the real Firewall: nftables over netlink, in the network namespace
// it was made for. It holds no connection between calls, so it is safe for
// concurrent use; the kernel serialises the batches.
type NFT struct {
	opts []nftables.ConnOption
}

var _ Firewall = (*NFT)(nil)

// New returns the Firewall of the caller's network namespace (the host's,
// for flockctl).
func New() *NFT { return &NFT{} }

// NewInNetNS returns a Firewall acting on the network namespace fd refers to
// (e.g. an open /run/netns/NAME). The caller keeps fd open while it is used.
func NewInNetNS(fd int) *NFT {
	return &NFT{opts: []nftables.ConnOption{nftables.WithNetNSFd(fd)}}
}

func (n *NFT) conn() (*nftables.Conn, error) { return nftables.New(n.opts...) }

var table = &nftables.Table{Family: nftables.TableFamilyINet, Name: Table}

// Ensure replaces table inet flock with p in one netlink batch: add table
// (so the delete cannot fail on an absent one), delete table (with
// everything in it), add table, counter, set and elements, chain, rules.
// The kernel applies a batch as one transaction, so packets see either the
// old table or the new one, never a moment without rules; a batch the
// kernel refuses changes nothing.
func (n *NFT) Ensure(ctx context.Context, p Policy) error {
	const what = "replacing table inet " + Table
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nftables: %s: %w", what, err)
	}
	rs, err := build(p)
	if err != nil {
		return fmt.Errorf("nftables: %s: %w", what, err)
	}
	c, err := nftables.New(append(n.opts[:len(n.opts):len(n.opts)], nftables.WithSockOptions(batchBuffers(rs)))...)
	if err != nil {
		return wrap(what, err)
	}
	c.AddTable(rs.table)
	c.DelTable(rs.table)
	c.AddTable(rs.table)
	for _, o := range rs.objs {
		c.AddObj(o)
	}
	for _, s := range rs.sets {
		if err := c.AddSet(s, rs.elems[s.Name]); err != nil {
			return fmt.Errorf("nftables: %s: set %s: %w", what, s.Name, err)
		}
	}
	for _, ch := range rs.chains {
		c.AddChain(ch)
		for _, r := range rs.rules[ch.Name] {
			c.AddRule(r)
		}
	}
	return wrap(what, c.Flush())
}

// batchBuffers sizes the netlink socket for one batch of rs: the kernel
// refuses a message longer than the send buffer (EMSGSIZE; the default
// 208 KiB holds about 300 allowances) and drops acknowledgements that
// overflow the receive buffer (ENOBUFS), one per rule. The sizes are
// generous estimates (a guarded rule is about 700 bytes on the wire, an
// ack under 1 KiB of buffer); the kernel only charges what is used. The
// FORCE options pass net.core.wmem_max and rmem_max; Ensure needs
// CAP_NET_ADMIN anyway, which they require.
func batchBuffers(rs *ruleset) nftables.SockOption {
	msgs, wire := 16, 64<<10
	for _, rules := range rs.rules {
		for _, r := range rules {
			msgs++
			wire += 256 + 64*len(r.Exprs)
		}
	}
	for _, el := range rs.elems {
		wire += 64 * len(el)
	}
	return func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return nil // no socket to size: the library's test dialer
		}
		var serr error
		err = raw.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, max(wire, 256<<10)); serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, max(2<<10*msgs, 256<<10))
			}
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("sizing the netlink socket for the batch: %w", serr)
		}
		return nil
	}
}

// Remove deletes table inet flock and only it. The batch adds the table
// first so that deleting an absent table is not an error.
func (n *NFT) Remove(ctx context.Context) error {
	const what = "removing table inet " + Table
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nftables: %s: %w", what, err)
	}
	c, err := n.conn()
	if err != nil {
		return wrap(what, err)
	}
	c.AddTable(table)
	c.DelTable(table)
	return wrap(what, c.Flush())
}

// Matches reads table inet flock back and compares its rendering with the
// rendering of the table p asks for: every set element, every rule
// expression and comment (one of which carries p's hash), the chain's hook,
// priority and policy, the counter object, and that nothing else is in the
// table. Counter values and handles are the kernel's and are ignored. So a
// flushed table, a deleted or added rule, a removed set element or a table
// left by another flockctl version all read as false.
func (n *NFT) Matches(ctx context.Context, p Policy) (bool, error) {
	want, err := build(p)
	if err != nil {
		return false, fmt.Errorf("nftables: comparing table inet %s: %w", Table, err)
	}
	got, ok, err := n.current(ctx)
	if err != nil || !ok {
		return false, err
	}
	return render(got) == render(want), nil
}

// Current renders the table as the kernel has it now, in Render's format;
// present is false when there is no table inet flock. For diagnostics: a
// diff of Current against Render(p) is what Matches saw.
func (n *NFT) Current(ctx context.Context) (text string, present bool, err error) {
	rs, ok, err := n.current(ctx)
	if err != nil || !ok {
		return "", ok, err
	}
	return render(rs), true, nil
}

// Denied returns the packets and bytes counted as denied since the table
// was last replaced. Absent table: zeros, no error.
func (n *NFT) Denied(ctx context.Context) (packets, bytes uint64, err error) {
	return n.counter(ctx, DeniedCounter)
}

// ClusterDenied returns the packets and bytes sent to the cluster port from
// outside the flock's hosts (and dropped) since the table was last
// replaced. Absent table: zeros, no error; a single-host table has no such
// counter: an error.
func (n *NFT) ClusterDenied(ctx context.Context) (packets, bytes uint64, err error) {
	return n.counter(ctx, ClusterDeniedCounter)
}

func (n *NFT) counter(ctx context.Context, name string) (packets, bytes uint64, err error) {
	what := "reading counter " + name + " of table inet " + Table
	rs, ok, err := n.current(ctx)
	if err != nil || !ok {
		return 0, 0, err
	}
	for _, o := range rs.objs {
		if c, isCounter := o.Obj.(*expr.Counter); isCounter && o.Name == name {
			return c.Packets, c.Bytes, nil
		}
	}
	return 0, 0, fmt.Errorf("nftables: %s: the table has no such counter", what)
}

// Refused reads the per-uid counters of sets refused and logged: those
// two sets alone, not the whole table (flock.service's /metrics asks at
// every scrape, flockctl events every half second). No table, or a table
// from before the sets existed: none, no error.
func (n *NFT) Refused(ctx context.Context) (map[uint32]Refusals, error) {
	const what = "reading the refusal counters of table inet " + Table
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nftables: %s: %w", what, err)
	}
	c, err := nftables.New(append(n.opts[:len(n.opts):len(n.opts)], nftables.AsLasting())...)
	if err != nil {
		return nil, wrap(what, err)
	}
	defer func() { _ = c.CloseLasting() }()
	rs := &ruleset{elems: map[string][]nftables.SetElement{}}
	for _, name := range []string{RefusedSet, LoggedSet} {
		set, err := c.GetSetByName(table, name)
		if errors.Is(err, unix.ENOENT) {
			return map[uint32]Refusals{}, nil
		}
		if err != nil {
			return nil, wrap(what+": set "+name, err)
		}
		if rs.elems[name], err = c.GetSetElements(set); err != nil {
			return nil, wrap(what+": elements of set "+name, err)
		}
	}
	return refusals(rs), nil
}

// refusals reads the counters the deny rule keeps per uid.
func refusals(rs *ruleset) map[uint32]Refusals {
	out := map[uint32]Refusals{}
	for _, set := range []string{RefusedSet, LoggedSet} {
		for _, e := range rs.elems[set] {
			if len(e.Key) != 4 || e.Counter == nil {
				continue
			}
			uid := binaryutil.NativeEndian.Uint32(e.Key)
			r := out[uid]
			if set == RefusedSet {
				r.Refused = e.Counter.Packets
			} else {
				r.Logged = e.Counter.Packets
			}
			out[uid] = r
		}
	}
	return out
}

// current reads the whole table: chains and their rules, sets and their
// elements, named objects. Listing by dump (not by name) means an absent
// table is an empty answer rather than an error to decode. The dumps are
// not one snapshot: an Ensure racing with them can make Matches say false,
// which only costs a redundant Ensure. The library skips expression types
// it cannot parse; a rule added or removed is still seen (rule count), but
// one of ours replaced in place by a foreign expression might not be.
func (n *NFT) current(ctx context.Context) (*ruleset, bool, error) {
	const what = "reading table inet " + Table
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("nftables: %s: %w", what, err)
	}
	// One netlink socket for the half-dozen dumps below, not one each.
	c, err := nftables.New(append(n.opts[:len(n.opts):len(n.opts)], nftables.AsLasting())...)
	if err != nil {
		return nil, false, wrap(what, err)
	}
	defer func() { _ = c.CloseLasting() }()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, false, wrap(what+": listing tables", err)
	}
	var t *nftables.Table
	for _, x := range tables {
		if x.Name == Table {
			t = x
		}
	}
	if t == nil {
		return nil, false, nil
	}
	rs := &ruleset{table: t, elems: map[string][]nftables.SetElement{}, rules: map[string][]*nftables.Rule{}}

	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, false, wrap(what+": listing chains", err)
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != Table {
			continue
		}
		rs.chains = append(rs.chains, ch)
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return nil, false, wrap(what+": listing rules of chain "+ch.Name, err)
		}
		rs.rules[ch.Name] = rules
	}

	sets, err := c.GetSets(t)
	if err != nil {
		return nil, false, wrap(what+": listing sets", err)
	}
	for _, s := range sets {
		rs.sets = append(rs.sets, s)
		el, err := c.GetSetElements(s)
		if err != nil {
			return nil, false, wrap(what+": listing elements of set "+s.Name, err)
		}
		rs.elems[s.Name] = el
	}

	objs, err := c.GetNamedObjects(t)
	if err != nil {
		return nil, false, wrap(what+": listing objects", err)
	}
	for _, o := range objs {
		if no, ok := o.(*nftables.NamedObj); ok {
			rs.objs = append(rs.objs, no)
		}
	}
	return rs, true, nil
}

// wrap says what was attempted and, for the two failures an operator can
// act on, what to do.
func wrap(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("nftables: %s: permission denied (needs root or CAP_NET_ADMIN): %w", what, err)
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EAFNOSUPPORT), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("nftables: %s: this kernel has no nf_tables (load it with `modprobe nf_tables`, or use a kernel built with CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET): %w", what, err)
	}
	return fmt.Errorf("nftables: %s: %w", what, err)
}
