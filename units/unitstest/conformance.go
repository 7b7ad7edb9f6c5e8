// Package unitstest is the conformance suite of units.Manager: one list of
// steps that the fake (in units' unit tests) and the real systemd manager
// (in a booted machine, test.TestConformance) both run, so the fake the
// planner is tested against cannot drift from systemd.
package unitstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// stepTimeout bounds one step: a start or stop job of systemd's, or a
// daemon-reload.
const stepTimeout = time.Minute

// Unit is a transient agent unit the suite starts: a sleeper, so it stays
// active until stopped, whose Description carries hash.
func Unit(id int, hash string) units.Unit {
	return units.Unit{
		Name:        spec.UnitName(id),
		Description: fmt.Sprintf("flock conformance unit %d [flock:%s]", id, hash),
		Hash:        hash,
		Properties: []units.Property{
			{Name: "Type", Value: "exec"},
			{Name: "ExecStart", Value: []units.ExecCommand{{Path: "/bin/sleep", Argv: []string{"/bin/sleep", "infinity"}}}},
		},
	}
}

// service is a stand-in for flock.service: a sleeper that is enabled like
// the bus; gen makes each version's bytes differ.
func service(gen int) []byte {
	return fmt.Appendf(nil, `# flock conformance stand-in for the bus, version %d
[Unit]
Description=flock conformance stand-in for the bus

[Service]
Type=exec
ExecStart=/bin/sleep infinity

[Install]
WantedBy=multi-user.target
`, gen)
}

// counterSocket and counterTemplate stand in for the firewall counters'
// pair: a socket with a template behind it (Accept=yes).
var (
	counterSocket = []byte(`# flock conformance stand-in for the counters socket
[Socket]
ListenStream=/run/flock-conformance.sock
Accept=yes

[Install]
WantedBy=sockets.target
`)
	counterTemplate = []byte(`# flock conformance stand-in for the counters reader
[Service]
ExecStart=/bin/echo conformance
StandardInput=socket
`)
)

// Hashes of the suite's units, as HashFromDescription reads them back.
const (
	hashA = "aaaaaaaaaaaa"
	hashB = "bbbbbbbbbbbb"
	hashC = "cccccccccccc"
)

// step is one call (or none) and what the host must look like after it.
type step struct {
	name    string
	do      func(ctx context.Context, m units.Manager) error
	check   func(t *testing.T, ctx context.Context, m units.Manager) // more than List and Service say; may be nil
	units   map[string]string                                        // List: unit name -> hash, each active/running
	service units.ServiceStatus                                      // Service
}

// Run checks the contract the planner relies on: Start replaces a unit of
// the same name and is idempotent; List shows exactly flock's running
// units with the hash of their Description, and never flock.service;
// ActiveState reads a unit's state as List and Service do, and says
// ErrNotLoaded of one that is not there; Stop makes a unit gone and
// forgives one that is gone already;
// InstallService, RestartService and RemoveService as Service reads them
// back. newManager returns a manager of a host with no flock units and no
// flock.service; the suite leaves it so.
func Run(t *testing.T, newManager func(t *testing.T) units.Manager) {
	m := newManager(t)
	t.Cleanup(func() {
		// Whatever step failed, leave the host as found.
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		for _, id := range []int{1, 2} {
			if err := m.Stop(ctx, spec.UnitName(id)); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		for _, name := range []string{units.BusUnit, units.CountersSocket, units.CountersTemplate} {
			if err := m.RemoveService(ctx, name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	u1, u2 := spec.UnitName(1), spec.UnitName(2)
	none := units.ServiceStatus{ActiveState: "inactive"}
	installed := func(gen int, active string) units.ServiceStatus {
		return units.ServiceStatus{File: service(gen), Enabled: "enabled", ActiveState: active}
	}
	start := func(u units.Unit) func(context.Context, units.Manager) error {
		return func(ctx context.Context, m units.Manager) error { return m.Start(ctx, u) }
	}
	stop := func(name string) func(context.Context, units.Manager) error {
		return func(ctx context.Context, m units.Manager) error { return m.Stop(ctx, name) }
	}
	install := func(gen int) func(context.Context, units.Manager) error {
		return func(ctx context.Context, m units.Manager) error {
			return m.InstallService(ctx, units.BusUnit, service(gen))
		}
	}
	restart := func(ctx context.Context, m units.Manager) error { return m.RestartService(ctx, units.BusUnit) }
	remove := func(ctx context.Context, m units.Manager) error { return m.RemoveService(ctx, units.BusUnit) }

	steps := []step{
		{name: "a fresh host has no flock units and no flock.service", units: map[string]string{}, service: none},
		{name: "Start starts a unit", do: start(Unit(1, hashA)), units: map[string]string{u1: hashA}, service: none},
		{name: "Start of the same unit again leaves one", do: start(Unit(1, hashA)), units: map[string]string{u1: hashA}, service: none},
		{name: "Start of a changed unit replaces it", do: start(Unit(1, hashB)), units: map[string]string{u1: hashB}, service: none},
		{name: "Start of another unit leaves the first", do: start(Unit(2, hashC)), units: map[string]string{u1: hashB, u2: hashC}, service: none},
		{name: "Exit of a running unit: no restarts, no exit yet", units: map[string]string{u1: hashB, u2: hashC}, service: none,
			check: func(t *testing.T, ctx context.Context, m units.Manager) {
				if n, e := m.Exit(ctx, u1); n != 0 || e != (units.Exit{}) {
					t.Errorf("Exit(%s) = %d, %+v; want 0, %+v", u1, n, e, units.Exit{})
				}
			}},
		{name: "Properties reads a unit as systemd has it", units: map[string]string{u1: hashB, u2: hashC}, service: none,
			check: func(t *testing.T, ctx context.Context, m units.Manager) {
				p, err := m.Properties(ctx, u1)
				if err != nil {
					t.Fatalf("Properties(%s): %v", u1, err)
				}
				want := map[string]any{"Id": u1, "Description": Unit(1, hashB).Description, "Type": "exec"}
				for k, v := range want {
					if p[k] != v {
						t.Errorf("Properties(%s)[%s] = %#v, want %#v", u1, k, p[k], v)
					}
				}
				if _, err := m.Properties(ctx, spec.UnitName(9999)); !errors.Is(err, units.ErrNotLoaded) {
					t.Errorf("Properties of a unit never started: %v, want ErrNotLoaded", err)
				}
				if st, err := m.ActiveState(ctx, spec.UnitName(9999)); !errors.Is(err, units.ErrNotLoaded) {
					t.Errorf("ActiveState of a unit never started = %q, %v; want ErrNotLoaded", st, err)
				}
			}},
		{name: "Stop makes a unit gone", do: stop(u1), units: map[string]string{u2: hashC}, service: none},
		{name: "Stop of a unit already gone is not an error", do: stop(u1), units: map[string]string{u2: hashC}, service: none},
		{name: "Stop of a name never started is not an error", do: stop(spec.UnitName(9999)), units: map[string]string{u2: hashC}, service: none},
		{name: "InstallService writes and enables flock.service, not started", do: install(1), units: map[string]string{u2: hashC}, service: installed(1, "inactive")},
		{name: "InstallService of the same file again changes nothing", do: install(1), units: map[string]string{u2: hashC}, service: installed(1, "inactive")},
		{name: "RestartService starts it; List still shows agents only", do: restart, units: map[string]string{u2: hashC}, service: installed(1, "active")},
		{name: "InstallService of a new file leaves it running", do: install(2), units: map[string]string{u2: hashC}, service: installed(2, "active")},
		{name: "RestartService of a running flock.service", do: restart, units: map[string]string{u2: hashC}, service: installed(2, "active")},
		{name: "a template is a file: written, read back, never enabled or started", units: map[string]string{u2: hashC}, service: installed(2, "active"),
			do: func(ctx context.Context, m units.Manager) error {
				return m.InstallService(ctx, units.CountersTemplate, counterTemplate)
			},
			check: func(t *testing.T, ctx context.Context, m units.Manager) {
				checkStatic(t, ctx, m, units.CountersTemplate, units.ServiceStatus{File: counterTemplate})
				if err := m.RestartService(ctx, units.CountersTemplate); err == nil {
					t.Errorf("RestartService of a template: no error")
				}
			}},
		{name: "a socket is enabled and started as a service is", units: map[string]string{u2: hashC}, service: installed(2, "active"),
			do: func(ctx context.Context, m units.Manager) error {
				if err := m.InstallService(ctx, units.CountersSocket, counterSocket); err != nil {
					return err
				}
				return m.RestartService(ctx, units.CountersSocket)
			},
			check: func(t *testing.T, ctx context.Context, m units.Manager) {
				checkStatic(t, ctx, m, units.CountersSocket, units.ServiceStatus{File: counterSocket, Enabled: "enabled", ActiveState: "active"})
			}},
		{name: "RemoveService of the socket and the template", units: map[string]string{u2: hashC}, service: installed(2, "active"),
			do: func(ctx context.Context, m units.Manager) error {
				return errors.Join(m.RemoveService(ctx, units.CountersSocket), m.RemoveService(ctx, units.CountersTemplate))
			},
			check: func(t *testing.T, ctx context.Context, m units.Manager) {
				checkStatic(t, ctx, m, units.CountersSocket, none)
				checkStatic(t, ctx, m, units.CountersTemplate, units.ServiceStatus{})
			}},
		{name: "RemoveService stops, disables and deletes it", do: remove, units: map[string]string{u2: hashC}, service: none},
		{name: "RemoveService when there is none is not an error", do: remove, units: map[string]string{u2: hashC}, service: none},
		{name: "Stop of the last unit leaves none", do: stop(u2), units: map[string]string{}, service: none},
	}
	for _, s := range steps {
		// Each step starts from the one before: stop at the first failure.
		if !t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
			defer cancel()
			if s.do != nil {
				t0 := time.Now()
				if err := s.do(ctx, m); err != nil {
					t.Fatal(err)
				}
				t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
			}
			checkList(t, ctx, m, s.units)
			checkService(t, ctx, m, s.service)
			if s.check != nil {
				s.check(t, ctx, m)
			}
		}) {
			t.FailNow()
		}
	}
}

func checkList(t *testing.T, ctx context.Context, m units.Manager, want map[string]string) {
	t.Helper()
	sts, err := m.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]string{}
	for _, s := range sts {
		if !strings.HasPrefix(s.Name, units.Prefix) {
			t.Errorf("List returned %s, which is not a flock agent unit", s.Name)
		}
		if s.ActiveState != "active" || s.SubState != "running" {
			t.Errorf("List: %s is %s/%s, want active/running", s.Name, s.ActiveState, s.SubState)
		}
		if st, err := m.ActiveState(ctx, s.Name); err != nil || st != "active" {
			t.Errorf("ActiveState(%s) = %q, %v; want active", s.Name, st, err)
		}
		if _, dup := got[s.Name]; dup {
			t.Errorf("List returned %s twice", s.Name)
		}
		got[s.Name] = s.Hash
	}
	if !maps.Equal(got, want) {
		t.Errorf("List: units and hashes %v, want %v", got, want)
	}
}

func checkService(t *testing.T, ctx context.Context, m units.Manager, want units.ServiceStatus) {
	t.Helper()
	checkStatic(t, ctx, m, units.BusUnit, want)
	// A static unit is there while it has a file, whatever its state.
	st, err := m.ActiveState(ctx, units.BusUnit)
	switch {
	case want.File == nil && !errors.Is(err, units.ErrNotLoaded):
		t.Errorf("ActiveState(%s) with no file = %q, %v; want ErrNotLoaded", units.BusUnit, st, err)
	case want.File != nil && (err != nil || st != want.ActiveState):
		t.Errorf("ActiveState(%s) = %q, %v; want %q", units.BusUnit, st, err, want.ActiveState)
	}
}

func checkStatic(t *testing.T, ctx context.Context, m units.Manager, name string, want units.ServiceStatus) {
	t.Helper()
	got, err := m.Service(ctx, name)
	if err != nil {
		t.Fatalf("Service(%s): %v", name, err)
	}
	if !bytes.Equal(got.File, want.File) || (got.File == nil) != (want.File == nil) ||
		got.Enabled != want.Enabled || got.ActiveState != want.ActiveState {
		t.Errorf("Service(%s) = {File: %q, Enabled: %q, ActiveState: %q}, want {File: %q, Enabled: %q, ActiveState: %q}",
			name, got.File, got.Enabled, got.ActiveState, want.File, want.Enabled, want.ActiveState)
	}
}
