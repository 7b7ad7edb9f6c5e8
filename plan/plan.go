// Package plan turns a spec into the desired state of the host (plain data),
// diffs it against what the host has, and applies the difference through the
// OS-boundary interfaces. It never talks to the OS itself.
package plan

import (
	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// Desired is everything a spec asks of a host.
type Desired struct {
	Flock    *spec.Flock
	Shared   users.Group
	Accounts []users.Account
	Paths    []users.Path
	Units    []units.Unit // same order as Flock.Agents
	Policy   netpolicy.Policy
	// Identities are the bus users the flock needs: every agent's, then
	// the operator's. Their keys are host state, so the bus config is
	// computed from them at diff and apply time (BusConfig).
	Identities []string
	Service    []byte // flock.service
	// ProxyConfig is the egress proxy's config file and ProxyService its
	// unit; both nil when no agent has a name in its egress.
	ProxyConfig  []byte
	ProxyService []byte
}

// BusConfig is the bus configuration of d given the identities' keys.
func (d Desired) BusConfig(keys map[string]string) bus.Config { return bus.ForFlock(d.Flock, keys) }

// Build computes the desired state of f. Pure.
func Build(f *spec.Flock, uo units.Options) Desired {
	shared, accts := users.Accounts(f)
	d := Desired{
		Flock:    f,
		Shared:   shared,
		Accounts: accts,
		Paths:    append(users.Paths(f), users.Seeds(f)...),
		Policy:   netpolicy.ForFlock(f),
	}
	for _, a := range f.Agents {
		d.Units = append(d.Units, units.ForAgent(f, a, uo))
		d.Identities = append(d.Identities, spec.UserName(a.ID))
	}
	d.Service = units.BusService(uo.FlockctlBin, uo.FlockctlBuild, bus.ConfigPath)
	if pc := proxy.ConfigFor(f); len(pc.Policy.Agents) > 0 {
		// The proxy publishes its decisions on the bus as itself.
		d.Identities = append(d.Identities, bus.ProxyName)
		b, err := pc.Encode()
		if err != nil {
			panic(err) // strings and numbers only
		}
		d.ProxyConfig = b
		d.ProxyService = units.ProxyService(uo.FlockctlBin, uo.FlockctlBuild, proxy.ConfigPath, spec.CredPath(bus.ProxyName))
	}
	d.Identities = append(d.Identities, bus.OperatorName)
	return d
}

// Host is the set of OS boundaries a plan is applied through.
type Host struct {
	Users    users.Host
	Units    units.Manager
	Firewall netpolicy.Firewall
	Bus      bus.Host
	Proxy    proxy.Host
}

// AgentView is one agent as the plan has it: its unit and its bus
// permissions, which flockctl explain prints.
type AgentView struct {
	Agent spec.Agent
	UID   uint32
	Unit  units.Unit
	Bus   bus.User
}

// Views are d's agents in spec order. Bus permissions do not depend on
// the keys, which are host state, so none is needed.
func (d Desired) Views() []AgentView {
	keys := map[string]string{}
	for _, name := range d.Identities {
		keys[name] = "-"
	}
	perms := map[int]bus.User{}
	for _, u := range d.BusConfig(keys).Users {
		perms[u.Agent] = u
	}
	out := make([]AgentView, len(d.Flock.Agents))
	for i, a := range d.Flock.Agents {
		out[i] = AgentView{Agent: a, UID: d.Flock.UID(a.ID), Unit: d.Units[i], Bus: perms[a.ID]}
	}
	return out
}
