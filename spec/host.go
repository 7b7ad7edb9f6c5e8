package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
)

// HostBlock is a range of destinations that are this host (or its link)
// rather than the world outside it.
type HostBlock struct {
	Prefix netip.Prefix
	Kind   string // what an operator calls it: loopback, link-local, multicast
}

// HostBlocks are never reached through a wide allowance (0.0.0.0/0:*,
// 10.0.0.0/8:443): the firewall refuses them unless an allowance names
// them. Multicast is here because the kernel loops an agent's multicast
// back to this host's own sockets (IP_MULTICAST_LOOP is on by default).
// The host's other addresses (eth0's, a bridge's, broadcasts) change with
// its interfaces, so the firewall asks the kernel at packet time instead
// (netpolicy's fib address-type check).
var HostBlocks = []HostBlock{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// InHostBlock returns the host block p lies entirely inside, if any.
func InHostBlock(p netip.Prefix) (HostBlock, bool) {
	for _, b := range HostBlocks {
		if p.Addr().Is4() == b.Prefix.Addr().Is4() && p.Bits() >= b.Prefix.Bits() && b.Prefix.Contains(p.Addr()) {
			return b, true
		}
	}
	return HostBlock{}, false
}

// Wide reports whether an allowance to p means "these addresses outside
// this host" and so gets the host guard: any range not entirely inside a
// host block. A single address, or a range inside a host block, names its
// destination explicitly and is allowed as written.
func Wide(p netip.Prefix) bool {
	if p.IsSingleIP() {
		return false
	}
	_, in := InHostBlock(p)
	return !in
}

// Warnings are what provision and explain print before acting on f: each
// allowance that names this host explicitly, which the firewall allows as
// written; each that names a host's cluster port, which it refuses; and
// each env variable whose name says it holds a secret. local holds the
// host's own addresses (nil: only the fixed host blocks are checked). Pure.
func (f *Flock) Warnings(local []netip.Addr) []string {
	var out []string
	for _, a := range f.Agents {
		for i, e := range a.Egress {
			if e.IsName() {
				continue // the proxy checks what a name resolves to
			}
			if h, ok := f.clusterPortOf(e); ok {
				out = append(out, fmt.Sprintf("agent %d: egress[%d] %s is host %s's cluster port, which only the buses use: the firewall refuses it", a.ID, i, e, h.Name))
				continue
			}
			what := ""
			if b, ok := InHostBlock(e.Prefix); ok {
				what = "a " + b.Kind + " address"
			} else if e.Prefix.IsSingleIP() {
				for _, l := range local {
					if l.Unmap() == e.Prefix.Addr() {
						what = "one of this host's own addresses"
					}
				}
			}
			if what != "" {
				out = append(out, fmt.Sprintf("agent %d may reach %s on this host: egress[%d] names %s explicitly", a.ID, e, i, what))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(a.Env)) {
			if secretName.MatchString(k) && !pathName.MatchString(k) {
				out = append(out, fmt.Sprintf("agent %d: env.%s looks like a secret, and a unit's environment is readable by every user of this host (systemctl show); put it in a file in the agent's directory and give the file's path instead (a model API's key: name the API under providers: and grant it in models:, and the key stays with flock-proxy)", a.ID, k))
			}
		}
	}
	return out
}

// clusterPortOf returns the host whose cluster port e names, address and
// port both written out, in a multi-host flock.
func (f *Flock) clusterPortOf(e Egress) (Host, bool) {
	port := f.Bus.ClusterPort
	if port == 0 {
		port = DefaultClusterPort
	}
	if !f.Clustered() || !e.Prefix.IsSingleIP() || int(e.Port) != port || e.Proto != "tcp" {
		return Host{}, false
	}
	for _, h := range f.Hosts {
		if h.Address.Unmap() == e.Prefix.Addr().Unmap() {
			return h, true
		}
	}
	return Host{}, false
}

// secretName is a variable name that usually holds a secret; pathName
// one that names where it is, which is the advice.
var (
	secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)`)
	pathName   = regexp.MustCompile(`(?i)_(FILE|PATH|DIR)$`)
)
