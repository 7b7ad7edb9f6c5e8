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
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/flockrun/flock/creds"
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
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(t *testing.T) hostUnderTest
	}{
		{"FakeHost", func(t *testing.T) hostUnderTest {
			return hostUnderTest{host: NewFakeHost(), listen: "127.0.0.1:4222"}
		}},
		{"System", func(t *testing.T) hostUnderTest {
			dir := t.TempDir()
			s := &System{Store: creds.Store{Dir: filepath.Join(dir, "creds")}, ConfigPath: filepath.Join(dir, "etc", "bus.json")}
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hostConformance(t, tc.make)
		})
	}
}

// freeAddr is a loopback address this test alone may listen on
// (freePorts): the config names it before the bus listens there.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(t, 1)[0]))
}

// hostConformance checks the contract the planner relies on beyond the
// identities (creds' identitiesConformance): Ensure reaches the host's
// identities, which the config's verbs leave alone; WriteConfig
// refuses an invalid config and Config reads back what it wrote (nil when
// there is none, also after RemoveConfig, which forgives an absent one);
// Reload reaches the bus and puts the installed config in force (Loaded),
// which WriteConfig alone does not, and without a config says ErrNoBus.
func hostConformance(t *testing.T, newHost func(t *testing.T) hostUnderTest) {
	ctx := context.Background()
	sub := newHost(t)
	h := sub.host
	pubs := map[string]string{} // name -> key, as Ensure said
	// configs are made once the keys are known.
	config := func(without ...string) *Config {
		f := testFlock()
		host, port, _ := net.SplitHostPort(sub.listen)
		f.Bus.Host = host
		f.Bus.Port = atoi(t, port)
		keys := maps.Clone(pubs)
		maps.DeleteFunc(keys, func(n, _ string) bool { return slices.Contains(without, n) })
		c := ForFlock(f, keys)
		return &c
	}
	ensure := func() error {
		for _, n := range []string{"flock-1", "flock-2", creds.OperatorName} {
			pub, _, err := h.Ensure(ctx, n)
			if err != nil {
				return err
			}
			pubs[n] = pub
		}
		return nil
	}

	for _, s := range []struct {
		name       string
		do         func() error
		wantErr    error          // nil: none; errAnyBus: any error
		identities bool           // Keys lists the ones Ensure made; false: none
		wantConfig func() *Config // nil: no config
		loaded     func() *Config // the config the running bus has in force; nil: not checked
	}{
		{name: "a fresh host has no identities and no config; Reload says ErrNoBus",
			do: func() error { return h.Reload(ctx) }, wantErr: ErrNoBus},
		{name: "Ensure creates identities", do: ensure, identities: true},
		{name: "WriteConfig refuses an invalid config",
			do: func() error { c := config(); c.Listen = "nowhere"; return h.WriteConfig(ctx, *c) }, wantErr: errAnyBus, identities: true},
		{name: "WriteConfig writes what Config reads", do: func() error { return h.WriteConfig(ctx, *config()) }, identities: true,
			wantConfig: func() *Config { return config() }},
		{name: "WriteConfig again", do: func() error { return h.WriteConfig(ctx, *config()) }, identities: true,
			wantConfig: func() *Config { return config() }},
		{name: "Reload reaches the bus", do: func() error {
			if sub.serve != nil {
				sub.serve(t)
			}
			return h.Reload(ctx)
		}, identities: true, wantConfig: func() *Config { return config() }, loaded: func() *Config { return config() }},
		{name: "WriteConfig of fewer users, and Reload",
			do: func() error {
				if err := h.WriteConfig(ctx, *config("flock-2")); err != nil {
					return err
				}
				return h.Reload(ctx)
			}, identities: true, wantConfig: func() *Config { return config("flock-2") }, loaded: func() *Config { return config("flock-2") }},
		{name: "WriteConfig without a Reload leaves the running bus as it was",
			do: func() error { return h.WriteConfig(ctx, *config()) }, identities: true,
			wantConfig: func() *Config { return config() }, loaded: func() *Config { return config("flock-2") }},
		{name: "WriteConfig back", do: func() error { return h.WriteConfig(ctx, *config("flock-2")) }, identities: true,
			wantConfig: func() *Config { return config("flock-2") }, loaded: func() *Config { return config("flock-2") }},
		{name: "RemoveConfig removes it", do: func() error { return h.RemoveConfig(ctx) }, identities: true},
		{name: "RemoveConfig again is not an error", do: func() error { return h.RemoveConfig(ctx) }, identities: true},
		{name: "Reload without a config says ErrNoBus", do: func() error { return h.Reload(ctx) }, wantErr: ErrNoBus, identities: true},
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
			want := map[string]string{}
			if s.identities {
				want = pubs
			}
			if got, err := h.Keys(ctx); err != nil || !maps.Equal(got, want) {
				t.Errorf("Keys = %v, %v; want %v", got, err, want)
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
