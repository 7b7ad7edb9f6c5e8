// Package netpolicy owns flock's nftables table, inet flock: agent sockets
// (matched by their uid) may reach the bus and their spec's allowances, and
// nothing else. It never touches another table.
package netpolicy

import "context"

// Table is the only nftables table flock creates.
const Table = "flock"

// Policy is the desired table as plain data.
type Policy struct {
	AgentUIDs []uint32 // sockets of these uids are filtered
	BusHost   string   // loopback address of the bus, e.g. 127.0.0.1
	BusPort   int
	// Egress allowances per uid, parsed from the spec (issue: bus and egress).
	Egress map[uint32][]Allow
}

// Allow is one extra destination an agent may reach.
type Allow struct {
	Prefix string // CIDR, e.g. 10.1.2.3/32 or 2001:db8::/64
	Port   int    // 0: any
	Proto  string // tcp or udp
}

// Firewall is the OS boundary of this package: netlink for real, Fake for
// planner tests.
type Firewall interface {
	// Ensure replaces table inet flock with p in one atomic batch.
	Ensure(ctx context.Context, p Policy) error
	// Remove deletes table inet flock; absent is not an error.
	Remove(ctx context.Context) error
	// Present reports whether table inet flock exists and matches p.
	Matches(ctx context.Context, p Policy) (bool, error)
}
