package bus

// Tier: unit (no root): the real Host is seeds and a config file in a
// temporary directory and an in-process bus, as flockctl serve runs it.
//
// One suite, run against FakeHost and System, so the fake the planner is
// tested against cannot drift from the real one.

import (
	"context"
	"errors"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nkeys"
)

// hostUnderTest is a Host and what the suite needs to reach its bus.
type hostUnderTest struct {
	host Host
	// listen is the address a config must name for Reload to reach the bus.
	listen string
	// serve starts the bus on the installed config, answering reloads as
	// flockctl serve does; nil when Reload needs no bus (the fake).
	serve func(t *testing.T)
}

func TestHostConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) hostUnderTest
	}{
		{"FakeHost", func(t *testing.T) hostUnderTest {
			return hostUnderTest{host: NewFakeHost(), listen: "127.0.0.1:4222"}
		}},
		{"System", func(t *testing.T) hostUnderTest {
			dir := t.TempDir()
			s := &System{Store: Store{Dir: filepath.Join(dir, "creds")}, ConfigPath: filepath.Join(dir, "etc", "bus.json")}
			return hostUnderTest{host: s, listen: freeAddr(t), serve: func(t *testing.T) {
				c, err := ReadConfig(s.ConfigPath)
				if err != nil {
					t.Fatal(err)
				}
				var srv atomic.Pointer[Server]
				srv.Store(startBus(t, c, Options{OnReload: func() error {
					c, err := ReadConfig(s.ConfigPath)
					if err != nil {
						return err
					}
					return srv.Load().Reload(c)
				}}))
			}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { hostConformance(t, tc.make) })
	}
}

// freeAddr is a loopback address with a port free a moment ago: the
// config names it before the bus listens there.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// hostConformance checks the contract the planner relies on: Ensure makes
// an identity once and then returns the same key; Keys lists exactly the
// identities; Remove and RemoveAll forget them and ignore names that are
// gone; names that are not identities are refused before anything
// changes; a cancelled context changes nothing and says so; WriteConfig
// refuses an invalid config and Config reads back what it wrote (nil when
// there is none, also after RemoveConfig, which forgives an absent one);
// Reload reaches the bus and puts the installed config in force (Loaded),
// which WriteConfig alone does not, and without a config says ErrNoBus.
func hostConformance(t *testing.T, newHost func(t *testing.T) hostUnderTest) {
	ctx := context.Background()
	sub := newHost(t)
	h := sub.host
	pubs := map[string]string{} // name -> key, as the first Ensure said
	keys := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = pubs[n]
		}
		return m
	}
	// configs are made once the keys are known.
	config := func(without ...string) *Config {
		f := testFlock()
		host, port, _ := net.SplitHostPort(sub.listen)
		f.Bus.Host = host
		f.Bus.Port = atoi(t, port)
		c := ForFlock(f, maps.Clone(keys(slices.DeleteFunc([]string{"flock-1", "flock-2", OperatorName}, func(n string) bool { return slices.Contains(without, n) })...)))
		return &c
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
	all := []string{"flock-1", "flock-2", OperatorName}
	afterRemove := []string{"flock-1", OperatorName}

	for _, s := range []struct {
		name       string
		do         func() error
		wantErr    error // nil: none; errAnyBus: any error
		keys       []string
		wantConfig func() *Config // nil: no config
		loaded     func() *Config // the config the running bus has in force; nil: not checked
	}{
		{name: "a fresh host has no identities and no config; Reload says ErrNoBus",
			do: func() error { return h.Reload(ctx) }, wantErr: ErrNoBus},
		{name: "Ensure creates identities", do: ensure(true, all...), keys: all},
		{name: "Ensure again returns the same keys", do: ensure(false, all...), keys: all},
		{name: "Ensure takes the highest agent id", do: ensure(true, "flock-65535"), keys: append(all[:3:3], "flock-65535")},
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
		{name: "WriteConfig refuses an invalid config",
			do: func() error { c := config(); c.Listen = "nowhere"; return h.WriteConfig(ctx, *c) }, wantErr: errAnyBus, keys: all},
		{name: "WriteConfig writes what Config reads", do: func() error { return h.WriteConfig(ctx, *config()) }, keys: all,
			wantConfig: func() *Config { return config() }},
		{name: "WriteConfig again", do: func() error { return h.WriteConfig(ctx, *config()) }, keys: all,
			wantConfig: func() *Config { return config() }},
		{name: "Reload reaches the bus", do: func() error {
			if sub.serve != nil {
				sub.serve(t)
			}
			return h.Reload(ctx)
		}, keys: all, wantConfig: func() *Config { return config() }, loaded: func() *Config { return config() }},
		{name: "WriteConfig of fewer users, and Reload",
			do: func() error {
				if err := h.WriteConfig(ctx, *config("flock-2")); err != nil {
					return err
				}
				return h.Reload(ctx)
			}, keys: all, wantConfig: func() *Config { return config("flock-2") }, loaded: func() *Config { return config("flock-2") }},
		{name: "WriteConfig without a Reload leaves the running bus as it was",
			do: func() error { return h.WriteConfig(ctx, *config()) }, keys: all,
			wantConfig: func() *Config { return config() }, loaded: func() *Config { return config("flock-2") }},
		{name: "WriteConfig back", do: func() error { return h.WriteConfig(ctx, *config("flock-2")) }, keys: all,
			wantConfig: func() *Config { return config("flock-2") }, loaded: func() *Config { return config("flock-2") }},
		{name: "Remove forgets an identity and ignores one that is gone",
			do: func() error { return h.Remove(ctx, []string{"flock-2", "flock-9"}) }, keys: afterRemove,
			wantConfig: func() *Config { return config("flock-2") }},
		{name: "a cancelled Ensure changes nothing",
			do: func() error { _, _, err := h.Ensure(cancelled, "flock-3"); return err }, wantErr: context.Canceled, keys: afterRemove,
			wantConfig: func() *Config { return config("flock-2") }},
		{name: "a cancelled Remove changes nothing",
			do: func() error { return h.Remove(cancelled, []string{"flock-1"}) }, wantErr: context.Canceled, keys: afterRemove,
			wantConfig: func() *Config { return config("flock-2") }},
		{name: "a cancelled RemoveAll changes nothing",
			do: func() error { return h.RemoveAll(cancelled) }, wantErr: context.Canceled, keys: afterRemove,
			wantConfig: func() *Config { return config("flock-2") }},
		{name: "a cancelled Keys is an error",
			do: func() error { _, err := h.Keys(cancelled); return err }, wantErr: context.Canceled, keys: afterRemove,
			wantConfig: func() *Config { return config("flock-2") }},
		{name: "RemoveConfig removes it", do: func() error { return h.RemoveConfig(ctx) }, keys: afterRemove},
		{name: "RemoveConfig again is not an error", do: func() error { return h.RemoveConfig(ctx) }, keys: afterRemove},
		{name: "Reload without a config says ErrNoBus", do: func() error { return h.Reload(ctx) }, wantErr: ErrNoBus, keys: afterRemove},
		{name: "RemoveAll forgets every identity", do: func() error { return h.RemoveAll(ctx) }},
		{name: "RemoveAll again is not an error", do: func() error { return h.RemoveAll(ctx) }},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			err := s.do()
			switch {
			case s.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case s.wantErr != nil && err == nil:
				t.Fatalf("no error, want %v", s.wantErr)
			case s.wantErr != nil && s.wantErr != errAnyBus && !errors.Is(err, s.wantErr):
				t.Fatalf("error %v does not match %v", err, s.wantErr)
			}
			if got, err := h.Keys(ctx); err != nil || !maps.Equal(got, keys(s.keys...)) {
				t.Errorf("Keys = %v, %v; want %v", got, err, keys(s.keys...))
			}
			got, err := h.Config(ctx)
			switch {
			case err != nil:
				t.Errorf("Config: %v", err)
			case s.wantConfig == nil && got != nil:
				t.Errorf("Config = %+v, want none", *got)
			case s.wantConfig != nil && (got == nil || !got.Equal(*s.wantConfig())):
				t.Errorf("Config = %+v, want %+v", got, *s.wantConfig())
			}
			if s.loaded != nil {
				if got, err := h.Status(ctx); err != nil || got.Config != s.loaded().Digest() {
					t.Errorf("Status = %+v, %v; want config %q", got, err, s.loaded().Digest())
				}
			}
		}) {
			t.FailNow()
		}
	}
}

// badNames are not identity names: no file may be reached through them.
var badNames = []string{"root", "flock-0", "flock-03", "flock-70000", "../flock-1", "flock-1/x", ""}

// errAnyBus stands for "some error" where the contract names no sentinel.
var errAnyBus = errors.New("any error")

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("port %q", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
