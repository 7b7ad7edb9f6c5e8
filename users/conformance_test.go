package users_test

// Tier: unit for the fake; root for the real paths (they chown to agent
// uids). The real accounts run the same suite in a booted machine's own
// /etc (test.TestConformance): here they would change the host's.

import (
	"path/filepath"
	"testing"

	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/users/userstest"
)

func TestFakeConformance(t *testing.T) {
	t.Run("accounts", func(t *testing.T) {
		userstest.Accounts(t, func(t *testing.T) users.Host { return users.NewFake() },
			func(t *testing.T, h users.Host, name string, uid uint32) { h.(*users.Fake).AddForeign(name, uid) })
	})
	t.Run("paths", func(t *testing.T) {
		userstest.Paths(t, func(t *testing.T) (users.Host, string) { return users.NewFake(), "/srv/flock-conformance" })
	})
	t.Run("readers", func(t *testing.T) {
		userstest.Readers(t, func(t *testing.T) users.Host { return users.NewFake() },
			func(t *testing.T, h users.Host, gid uint32) { h.(*users.Fake).AddForeignReaders(gid) })
	})
}

func TestSystemPathsConformance(t *testing.T) {
	// Tier: root.
	tier.RequireNeeds(t, "root", tier.Root("chowns to agent uids"))
	userstest.Paths(t, func(t *testing.T) (users.Host, string) {
		return &users.System{}, filepath.Join(t.TempDir(), "flock")
	})
}
