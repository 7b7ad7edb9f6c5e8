package bus

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// fakeUnits is systemd as the bus reads it, recording what was asked.
type fakeUnits struct {
	states map[string]wire.AgentUnit
	err    error

	mu    sync.Mutex
	asked []string
}

func (f *fakeUnits) States(_ context.Context, names []string) (map[string]wire.AgentUnit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, names...)
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]wire.AgentUnit{}
	for _, n := range names {
		if u, ok := f.states[n]; ok {
			out[n] = u
		}
	}
	return out, nil
}

// TestUnitsOverBus: the operator's scatter request on flock.bus.units is
// answered with this host's agents' units (a loaded unit with its
// restarts and last exit, a stopped one not asked for them, an absent
// one) and what the bus saw of each; a bus that cannot read units says
// why and still answers.
//
// Tier: unit (no root).
func TestUnitsOverBus(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	fu := &fakeUnits{states: map[string]wire.AgentUnit{
		"flock-agent@1.service": {Unit: "flock-agent@1.service", ActiveState: "failed", SubState: "failed", Restarts: 5, ExitCode: "killed", ExitStatus: 31},
		"flock-agent@2.service": {Unit: "flock-agent@2.service", ActiveState: "inactive", SubState: "dead"},
		"flock-agent@9.service": {Unit: "flock-agent@9.service", ActiveState: "active", SubState: "running"}, // not in the config
	}}
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Units: fu})
	connect(t, s, ids, "flock-3")
	op := connect(t, s, ids, creds.OperatorName)

	m, err := op.Request(wire.UnitsSubject, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.ParseUnits(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.HostUnits{Host: "", Agents: map[int]wire.AgentUnit{
		1: {Unit: "flock-agent@1.service", ActiveState: "failed", SubState: "failed", Restarts: 5, ExitCode: "killed", ExitStatus: 31},
		2: {Unit: "flock-agent@2.service", ActiveState: "inactive", SubState: "dead"},
		3: {Bus: wire.AgentOnBus{Connections: 1}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answer\n got %+v\nwant %+v", got, want)
	}
	fu.mu.Lock()
	if !slices.Equal(fu.asked, []string{"flock-agent@1.service", "flock-agent@2.service", "flock-agent@3.service"}) {
		t.Errorf("asked of %v, want this host's agents' units", fu.asked)
	}
	fu.mu.Unlock()

	fu.mu.Lock()
	fu.err = errors.New("dbus: connection refused")
	fu.mu.Unlock()
	got = s.HostUnits(context.Background())
	if got.Error != "reading the units over D-Bus: dbus: connection refused" || len(got.Agents) != 3 || got.Agents[3].Bus.Connections != 1 {
		t.Errorf("without D-Bus: %+v", got)
	}
}

// Tier: unit. A bus answers for the agents the config places on its own
// host; without a cluster every agent is its own.
func TestLocalAgents(t *testing.T) {
	t.Parallel()
	users := []User{{Name: "flock-1", Agent: 1}, {Name: "flock-2", Agent: 2}, {Name: creds.OperatorName}, {Name: "flock-3", Agent: 3}}
	for _, tc := range []struct {
		name     string
		cluster  *Cluster
		wantHost string
		want     []int
	}{
		{"one host", nil, "", []int{1, 2, 3}},
		{"host b", &Cluster{Server: "b", Hosts: map[int]string{1: "a", 2: "b", 3: "b"}}, "b", []int{2, 3}},
		{"host c, no agents", &Cluster{Server: "c", Hosts: map[int]string{1: "a", 2: "b", 3: "b"}}, "c", nil},
	} {
		host, ids := localAgents(Config{Users: users, Cluster: tc.cluster})
		if host != tc.wantHost || !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %q %v, want %q %v", tc.name, host, ids, tc.wantHost, tc.want)
		}
	}
}
