package units_test

// Tier: unit. The real Manager runs the same suite in a booted machine
// (test.TestConformance): this host may have no systemd.

import (
	"testing"

	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/units/unitstest"
)

func TestFakeConformance(t *testing.T) {
	unitstest.Run(t, func(t *testing.T) units.Manager { return units.NewFake() })
}
