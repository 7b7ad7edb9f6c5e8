package spec

import "net/netip"

// A flock on several hosts: hosts lists them, each agent names the one it
// runs on, and the hosts' buses form one NATS cluster (routes on
// Bus.ClusterPort, mutual TLS) that replicates tasks and results. A spec
// without hosts (or with one) is one host, exactly as before.

// DefaultClusterPort is where the buses of a multi-host flock meet: NATS's
// own default cluster port.
const DefaultClusterPort = 6222

// ClusterName is the NATS cluster's name, the same on every host.
const ClusterName = "flock"

// Host is one machine of a multi-host flock.
type Host struct {
	Name    string     // [a-z0-9-], at most 63; the NATS server's name
	Address netip.Addr // where the other hosts' buses reach this one's cluster port
}

// Clustered reports whether the flock spans hosts (two or more).
func (f *Flock) Clustered() bool { return len(f.Hosts) > 1 }

// HostNamed returns the host called name.
func (f *Flock) HostNamed(name string) (Host, bool) {
	for _, h := range f.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// On returns the agents of host name, in id order. In a single-host flock
// every agent is on the one host, whatever name is asked.
func (f *Flock) On(name string) []Agent {
	if !f.Clustered() {
		return f.Agents
	}
	var out []Agent
	for _, a := range f.Agents {
		if a.Host == name {
			out = append(out, a)
		}
	}
	return out
}

// Replicas is how many copies the bus keeps of tasks, results and dead
// letters: three from three hosts up (one may be lost; NATS's raft needs
// a majority of the copies), else one.
func (f *Flock) Replicas() int {
	if len(f.Hosts) >= 3 {
		return 3
	}
	return 1
}
