package spec

import (
	"net/netip"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// hostsExample is what a fix shows of the hosts list.
const hostsExample = "hosts: [{name: a, address: 10.0.0.11}, {name: b, address: 10.0.0.12}]"

// hostNameRe is a host's name: a DNS label in lower case (it is the NATS
// server's name and its certificate's DNS name).
var hostNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// hosts reads the machines of a multi-host flock: a list of {name,
// address}, names and addresses unique. It also notes, for the agents'
// host fields, which names there are and whether every one was readable:
// a host dropped for its address is still a name an agent may give.
func (w *walker) hosts(n *yaml.Node, path string) []Host {
	w.hostsGiven = true
	if n.Kind != yaml.SequenceNode {
		w.fail(path, "is %s; list the machines, e.g. %s", kindName(n), hostsExample)
		w.hostsIncomplete = true
		return nil
	}
	if len(n.Content) == 0 {
		w.fail(path, "is empty; list the machines (%s), or remove hosts for a flock on this host alone", hostsExample)
		return nil
	}
	w.clustered = len(n.Content) > 1
	var out []Host
	names, addrs := map[string]int{}, map[netip.Addr]int{}
	for i, item := range n.Content {
		p := index(path, i)
		fs, ok := w.fields(item, p, hostKeys...)
		if !ok {
			w.hostsIncomplete = true
			continue
		}
		h, ok := Host{}, true
		if nn, given := fs["name"]; !given {
			w.fail(join(p, "name"), "missing; name every host, e.g. name: a")
			w.hostsIncomplete, ok = true, false
		} else if h.Name, ok = w.hostName(nn, join(p, "name")); !ok {
			w.hostsIncomplete = true
		} else if j, dup := names[h.Name]; dup {
			w.fail(join(p, "name"), "%q is already the name of hosts[%d]; give every host its own name", h.Name, j)
			ok = false
		} else {
			names[h.Name] = i
			w.hostNames = append(w.hostNames, h.Name)
		}
		if an, given := fs["address"]; !given {
			w.fail(join(p, "address"), "missing; give the address the other hosts reach this one at, e.g. address: 10.0.0.11")
			ok = false
		} else if addr, good := w.hostAddress(an, join(p, "address")); !good {
			ok = false
		} else if j, dup := addrs[addr]; dup {
			w.fail(join(p, "address"), "%s is already the address of hosts[%d]; give every host its own address", addr, j)
			ok = false
		} else {
			addrs[addr] = i
			h.Address = addr
		}
		if ok {
			out = append(out, h)
		}
	}
	return out
}

func (w *walker) hostName(n *yaml.Node, path string) (string, bool) {
	s, ok := w.str(n, path, "a")
	if !ok {
		return "", false
	}
	if !hostNameRe.MatchString(s) {
		w.fail(path, "%q is not a host name; use lower-case letters, digits and -, at most 63, starting and ending with a letter or digit, e.g. vps-1", s)
		return "", false
	}
	return s, true
}

// hostAddress reads the IP literal a host's bus is reached at by the
// others: one machine's address, not a name (the firewall opens the
// cluster port to exactly these addresses).
func (w *walker) hostAddress(n *yaml.Node, path string) (netip.Addr, bool) {
	s, ok := w.str(n, path, "10.0.0.11")
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil || a.Zone() != "":
		w.fail(path, "%q is not an IP address; write the address the other hosts reach this one at, e.g. 10.0.0.11 (not a name, not a CIDR)", s)
	case a.Unmap().IsLoopback(), a.Unmap().IsUnspecified(), a.Unmap().IsMulticast():
		w.fail(path, "%s is a loopback, unspecified or multicast address, which the other hosts cannot reach this one at; write this host's address on the network they share, e.g. 10.0.0.11", s)
	default:
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// hostRef reads an agent's (or the defaults') host: one of the spec's
// hosts. A wrong one is kept, so the agents that inherit it are not each
// reported again as having none.
func (w *walker) hostRef(n *yaml.Node, path string) string {
	s, ok := w.str(n, path, "a")
	if !ok {
		return "?"
	}
	switch {
	case !w.hostsGiven:
		w.fail(path, "%q names a host, but the spec lists none; list the machines (%s), or remove host", s, hostsExample)
	case !contains(w.hostNames, s) && !w.hostsIncomplete:
		w.fail(path, "%q is not one of the hosts; choose %s", s, or(w.hostNames))
	}
	return s
}

// hostRule is checked for every agent: in a multi-host flock each names
// its host, itself or through defaults.
func (w *walker) hostRule(a Agent, path string) {
	if w.clustered && a.Host == "" && !w.hostsIncomplete {
		w.fail(join(path, "host"), "missing; in a flock on several hosts every agent names the one it runs on (%s), here or in defaults (defaults: {host: %s})",
			or(w.hostNames), w.hostNames[0])
	}
}

// settle finishes what depends on the whole spec: the cluster port's
// default, and on one host no host or cluster port at all (as before
// hosts existed).
func (w *walker) settle(f *Flock) {
	if !f.Clustered() {
		f.Bus.ClusterPort = 0
		for i := range f.Agents {
			f.Agents[i].Host = ""
		}
		return
	}
	if f.Bus.ClusterPort == 0 {
		f.Bus.ClusterPort = DefaultClusterPort
	}
	for _, other := range []struct {
		name string
		port int
	}{{"bus.listen", f.Bus.Port}, {"bus.monitor", f.Bus.MonitorPort}, {"bus.metrics", f.Bus.MetricsPort}} {
		if f.Bus.ClusterPort == other.port {
			w.fail("bus.cluster_port", "%d is also the port of %s; give the cluster its own port, e.g. cluster_port: %d", f.Bus.ClusterPort, other.name, otherPort(f.Bus))
		}
	}
}

// otherPort is a cluster port none of b's listeners has: the default, or
// the first free one above it.
func otherPort(b Bus) int {
	p := DefaultClusterPort
	for p == b.Port || p == b.MonitorPort || p == b.MetricsPort {
		p++
	}
	return p
}

// or lists choices for a fix: "a, b or c".
func or(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
