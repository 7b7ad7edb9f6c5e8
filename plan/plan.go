// Package plan turns a spec into the desired state of the host (plain data),
// diffs it against what the host has, and applies the difference through the
// OS-boundary interfaces. It never talks to the OS itself.
package plan

import (
	"maps"
	"slices"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// Desired is everything a spec asks of a host.
type Desired struct {
	Flock *spec.Flock
	Site  Site // which of the flock's hosts this is (site.go)
	// Agents are this host's agents (all of Flock's on one host).
	Agents   []spec.Agent
	Shared   users.Group
	Accounts []users.Account // every agent's, on every host
	// Paths are this host's agents' tree, what the readers' group reads
	// (users.ReaderPaths: their gid is the host's, filled in by
	// PathsWith) and the agents' seeds.
	Paths  []users.Path
	Units  []units.Unit // same order as Agents
	Policy netpolicy.Policy
	// Identities are the bus users with a seed on this host: each of its
	// agents', the proxy's, then the reader's and the operator's. Their keys are host
	// state (or derived: Site.Keys), so the bus config is computed from
	// them at diff and apply time (BusConfig).
	Identities []string
	Service    []byte // flock.service
	// ProxyConfig is the egress proxy's config file and ProxyService its
	// unit; both nil when no agent has a name in its egress.
	ProxyConfig  []byte
	ProxyService []byte
	// CountersSocket and CountersService are the firewall counters'
	// reader for /metrics (units.CountersSocket, units.CountersTemplate);
	// both nil while bus.metrics is off.
	CountersSocket  []byte
	CountersService []byte
	// SecretsMaterial: this host's agents are granted secrets, so the
	// material (creds.Material) must be there.
	SecretsMaterial bool

	unitOptions units.Options // for the units of other hosts' agents (Views)
}

// BusConfig is the bus configuration of d given the identities' keys as
// on disk: every agent of the flock is a user, with its derived key where
// there is one (Site.Keys, which a local seed is made to match).
func (d Desired) BusConfig(keys map[string]string) bus.Config {
	if len(d.Site.Keys) > 0 {
		keys = maps.Clone(keys)
		maps.Copy(keys, d.Site.Keys)
	}
	c := bus.ForFlock(d.Flock, keys)
	c.Cluster = clusterConfig(d.Flock, d.Site.Host)
	return c
}

// Build computes the desired state of f on site s. Pure.
func Build(f *spec.Flock, s Site, uo units.Options) Desired {
	shared, accts := users.Accounts(f)
	here := local(f, s.Host)
	d := Desired{
		Flock:    f,
		Site:     s,
		Agents:   here.Agents,
		Shared:   shared,
		Accounts: accts,
		Paths:    slices.Concat(users.Paths(here), users.ReaderPaths(), users.Seeds(here)),
		Policy:   netpolicy.ForFlock(here),

		unitOptions: uo,
	}
	for _, a := range here.Agents {
		d.Units = append(d.Units, units.ForAgent(f, a, uo))
		d.Identities = append(d.Identities, spec.UserName(a.ID))
	}
	var clusterCreds []string
	if f.Clustered() {
		clusterCreds = ClusterCredentials
	}
	d.Service = units.BusService(uo.FlockctlBin, uo.FlockctlBuild, bus.ConfigPath, clusterCreds...)
	if f.Bus.Metrics() != "" {
		d.CountersSocket = units.CountersSocketUnit()
		d.CountersService = units.CountersService(uo.FlockctlBin)
	}
	d.SecretsMaterial = len(GrantedSecrets(f, here.Agents)) > 0
	if pc := proxyConfig(here, uo.Placeholders); len(pc.Policy.Agents) > 0 {
		// The proxy publishes its decisions on the bus as itself.
		d.Identities = append(d.Identities, creds.ProxyName)
		b, err := pc.Encode()
		if err != nil {
			panic(err) // strings and numbers only
		}
		d.ProxyConfig = b
		d.ProxyService = units.ProxyService(uo.FlockctlBin, uo.FlockctlBuild, proxy.ConfigPath, spec.CredPath(creds.ProxyName),
			proxySecrets(f, here.Agents, uo), pc.Gateway.Credentials()...)
	}
	// The read-only verbs of the readers' group connect as the reader.
	d.Identities = append(d.Identities, creds.ReaderName, creds.OperatorName)
	return d
}

// PathsWith is d's paths with the readers' group's gid filled in, as the
// host has it (readers nil: there is no such group; those paths keep gid
// 0 and Current says why).
func (d Desired) PathsWith(readers *uint32) []users.Path {
	if readers == nil {
		return d.Paths
	}
	return users.WithGroup(d.Paths, spec.ReadersGroup, *readers)
}

// Host is the set of OS boundaries a plan is applied through.
type Host struct {
	Users    users.Host
	Units    units.Manager
	Firewall netpolicy.Firewall
	Bus      bus.Host
	Proxy    proxy.Host
	// Secrets is the secrets' material; nil where no plan needs it (a
	// reader's host, which reads none of it).
	Secrets creds.Material
	// Say is told what an apply did other than its plan says (a
	// hand-over that fell back to a restart); nil: no one.
	Say func(format string, args ...any)
}

// AgentView is one agent as the plan has it: its unit and its bus
// permissions, which flockctl explain prints.
type AgentView struct {
	Agent spec.Agent
	UID   uint32
	Unit  units.Unit
	Bus   bus.User
}

// Views are d's agents in spec order, this host's and (in a multi-host
// flock) the others', each with the unit its own host gives it. Bus
// permissions do not depend on the keys, which are host state, so none
// is needed.
func (d Desired) Views() []AgentView {
	keys := map[string]string{}
	for _, name := range d.Identities {
		keys[name] = "-"
	}
	for _, a := range d.Flock.Agents {
		keys[spec.UserName(a.ID)] = "-"
	}
	perms := map[int]bus.User{}
	for _, u := range bus.ForFlock(d.Flock, keys).Users {
		perms[u.Agent] = u
	}
	mine := map[int]units.Unit{}
	for i, a := range d.Agents {
		mine[a.ID] = d.Units[i]
	}
	out := make([]AgentView, len(d.Flock.Agents))
	for i, a := range d.Flock.Agents {
		u, ok := mine[a.ID]
		if !ok {
			u = units.ForAgent(d.Flock, a, d.unitOptions)
		}
		out[i] = AgentView{Agent: a, UID: d.Flock.UID(a.ID), Unit: u, Bus: perms[a.ID]}
	}
	return out
}
