package status

import (
	"maps"
	"slices"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/spec"
)

// Placement is where a multi-host flock's agents run, for the HOST column
// of status and tasks; nil for a flock on one host (no column, output as
// before flocks spanned hosts).
type Placement struct {
	self  string         // this host; "" when it cannot be told (then every agent is asked of its host's bus)
	of    map[int]string // agent id -> its host
	hosts []string       // every host: the spec's order, else sorted
}

// PlacementOf reads the placement from the spec when it spans hosts, else
// from the bus config's cluster (a flockctl given a spec of one host on a
// host still provisioned as one of several); nil when neither spans hosts.
// thisHost tells this host from this machine's addresses, as provision
// does, when the bus config does not name it ("": cannot tell).
func PlacementOf(f *spec.Flock, cfg *bus.Config, thisHost func(*spec.Flock) string) *Placement {
	clustered := cfg != nil && cfg.Cluster != nil
	if !clustered && (f == nil || !f.Clustered()) {
		return nil
	}
	p := &Placement{of: map[int]string{}}
	if clustered {
		p.self = cfg.Cluster.Server
		maps.Copy(p.of, cfg.Cluster.Hosts)
	}
	if f != nil && f.Clustered() {
		for _, a := range f.Agents {
			p.of[a.ID] = a.Host
		}
		for _, h := range f.Hosts {
			p.hosts = append(p.hosts, h.Name)
		}
		if p.self == "" && thisHost != nil {
			p.self = thisHost(f)
		}
		return p
	}
	p.hosts = slices.Sorted(maps.Values(p.of))
	if p.self != "" {
		p.hosts = append(p.hosts, p.self)
		slices.Sort(p.hosts)
	}
	p.hosts = slices.Compact(p.hosts)
	return p
}

// Host is agent id's host; "" on one host.
func (p *Placement) Host(id int) string {
	if p == nil {
		return ""
	}
	return p.of[id]
}

// Local reports whether agent id runs here (every agent on one host).
func (p *Placement) Local(id int) bool { return p == nil || p.of[id] == p.self }

// Self is this host; "" when it cannot be told.
func (p *Placement) Self() string { return p.self }

// Hosts is every host of the flock.
func (p *Placement) Hosts() []string { return p.hosts }

// Others is every host but this one: the hosts whose buses are asked.
func (p *Placement) Others() []string {
	var out []string
	for _, h := range p.hosts {
		if h != p.self {
			out = append(out, h)
		}
	}
	return out
}
