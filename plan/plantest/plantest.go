// Package plantest is a host of fakes for the tests of plan's callers:
// every OS boundary's fake, with a flock provisioned on them as provision
// leaves a host.
package plantest

import (
	"context"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// Fakes are the boundaries of a plan.Host, each its package's fake, for a
// test to drift.
type Fakes struct {
	Users    *users.Fake
	Units    *units.Fake
	Firewall *netpolicy.Fake
	Bus      *bus.FakeHost
	Proxy    *proxy.Fake
	Secrets  *creds.MaterialFake
}

// Provisioned is a host of new fakes on which f was planned and applied
// with units.Options{}, and flock.service started (which has the bus read
// its config).
func Provisioned(t testing.TB, f *spec.Flock) (plan.Host, Fakes) {
	t.Helper()
	ctx := context.Background()
	fk := Fakes{Users: users.NewFake(), Units: units.NewFake(), Firewall: netpolicy.NewFake(), Bus: bus.NewFakeHost(), Proxy: &proxy.Fake{},
		Secrets: creds.NewMaterialFake(map[string][]byte{})}
	h := plan.Host{Users: fk.Users, Units: fk.Units, Firewall: fk.Firewall, Bus: fk.Bus, Proxy: fk.Proxy, Secrets: fk.Secrets}
	d := plan.Build(f, plan.Site{}, units.Options{})
	have, err := plan.Observe(ctx, h, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(ctx, h, d, plan.Diff(d, have), nil); err != nil {
		t.Fatal(err)
	}
	fk.Bus.Started()
	return h, fk
}
