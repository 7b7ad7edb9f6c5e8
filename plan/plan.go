// Package plan turns a spec into the desired state of the host (plain data),
// diffs it against what the host has, and applies the difference through the
// OS-boundary interfaces. It never talks to the OS itself.
package plan

import (
	"github.com/flockrun/flock/netpolicy"
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
}

// Build computes the desired state of f. Pure.
func Build(f *spec.Flock, uo units.Options) Desired {
	shared, accts := users.Accounts(f)
	d := Desired{
		Flock:    f,
		Shared:   shared,
		Accounts: accts,
		Paths:    users.Paths(f),
		Policy:   netpolicy.ForFlock(f),
	}
	for _, a := range f.Agents {
		d.Units = append(d.Units, units.ForAgent(f, a, uo))
	}
	return d
}

// Host is the set of OS boundaries a plan is applied through.
type Host struct {
	Users    users.Host
	Units    units.Manager
	Firewall netpolicy.Firewall
}
