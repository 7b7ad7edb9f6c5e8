package creds

// Tier: unit (no root): the real Identities is seeds in a temporary
// directory.
//
// One suite, run against Fake and Store, so the fake the planner is
// tested against cannot drift from the real one. bus's hostConformance
// runs the Host around them (the config and the running bus).

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestIdentitiesConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) Identities
	}{
		{"Fake", func(t *testing.T) Identities { return NewFake() }},
		{"Store", func(t *testing.T) Identities { return Store{Dir: filepath.Join(t.TempDir(), "creds")} }},
	} {
		t.Run(tc.name, func(t *testing.T) { identitiesConformance(t, tc.make(t)) })
	}
}

// identitiesConformance checks the contract the planner relies on: Ensure
// makes an identity once and then returns the same key; Keys lists
// exactly the identities; Remove and RemoveAll forget them and ignore
// names that are gone; names that are not identities are refused before
// anything changes; a cancelled context changes nothing and says so.
func identitiesConformance(t *testing.T, h Identities) {
	ctx := context.Background()
	pubs := map[string]string{} // name -> key, as the first Ensure said
	keys := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = pubs[n]
		}
		return m
	}
	ensure := func(created bool, names ...string) func() error {
		return func() error {
			for _, n := range names {
				pub, c, err := h.Ensure(ctx, n)
				if err != nil {
					return err
				}
				if !nkeys.IsValidPublicUserKey(pub) {
					t.Errorf("Ensure(%s) = %q, not a public user key", n, pub)
				}
				if old, ok := pubs[n]; ok && old != pub {
					t.Errorf("Ensure(%s) = %s, was %s", n, pub, old)
				}
				if c != created {
					t.Errorf("Ensure(%s): created %v, want %v", n, c, created)
				}
				pubs[n] = pub
			}
			return nil
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	all := []string{"flock-1", "flock-2", OperatorName, ProxyName, ReaderName}
	afterRemove := []string{"flock-1", OperatorName, ProxyName, ReaderName}

	for _, s := range []struct {
		name    string
		do      func() error
		wantErr error // nil: none
		keys    []string
	}{
		{name: "a fresh host has no identities", do: func() error { return nil }},
		{name: "Ensure creates identities", do: ensure(true, all...), keys: all},
		{name: "Ensure again returns the same keys", do: ensure(false, all...), keys: all},
		{name: "Ensure takes the highest agent id", do: ensure(true, "flock-65535"), keys: append(all[:5:5], "flock-65535")},
		{name: "Remove forgets it", do: func() error { return h.Remove(ctx, []string{"flock-65535"}) }, keys: all},
		{name: "Ensure refuses names that are not identities", do: func() error {
			for _, bad := range badNames {
				if _, _, err := h.Ensure(ctx, bad); err == nil {
					t.Errorf("Ensure(%q) accepted", bad)
				}
			}
			return nil
		}, keys: all},
		{name: "Remove refuses a bad name before removing anything", do: func() error {
			for _, bad := range badNames {
				if err := h.Remove(ctx, []string{"flock-1", bad}); err == nil {
					t.Errorf("Remove(flock-1, %q) accepted", bad)
				}
			}
			return nil
		}, keys: all},
		{name: "Remove forgets an identity and ignores one that is gone",
			do: func() error { return h.Remove(ctx, []string{"flock-2", "flock-9"}) }, keys: afterRemove},
		{name: "a cancelled Ensure changes nothing",
			do: func() error { _, _, err := h.Ensure(cancelled, "flock-3"); return err }, wantErr: context.Canceled, keys: afterRemove},
		{name: "a cancelled Remove changes nothing",
			do: func() error { return h.Remove(cancelled, []string{"flock-1"}) }, wantErr: context.Canceled, keys: afterRemove},
		{name: "a cancelled RemoveAll changes nothing",
			do: func() error { return h.RemoveAll(cancelled) }, wantErr: context.Canceled, keys: afterRemove},
		{name: "a cancelled Keys is an error",
			do: func() error { _, err := h.Keys(cancelled); return err }, wantErr: context.Canceled, keys: afterRemove},
		{name: "RemoveAll forgets every identity", do: func() error { return h.RemoveAll(ctx) }},
		{name: "RemoveAll again is not an error", do: func() error { return h.RemoveAll(ctx) }},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			err := s.do()
			switch {
			case s.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case s.wantErr != nil && !errors.Is(err, s.wantErr):
				t.Fatalf("error %v, want %v", err, s.wantErr)
			}
			if got, err := h.Keys(ctx); err != nil || !maps.Equal(got, keys(s.keys...)) {
				t.Errorf("Keys = %v, %v; want %v", got, err, keys(s.keys...))
			}
		}) {
			t.FailNow()
		}
	}
}

// badNames are not identity names: no file may be reached through them.
var badNames = []string{"root", "flock-0", "flock-03", "flock-70000", "../flock-1", "flock-1/x", ""}
