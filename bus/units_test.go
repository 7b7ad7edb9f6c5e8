package bus

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/bus/wire"
	"github.com/flockrun/flock/units"
)

// fakeUnits is systemd as the bus reads it, recording which units' usage
// was asked.
type fakeUnits struct {
	list  []units.Status
	usage map[string]units.Usage
	err   error

	mu    sync.Mutex
	asked []string
}

func (f *fakeUnits) List(context.Context) ([]units.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list, f.err
}

func (f *fakeUnits) Usage(_ context.Context, names []string) (map[string]units.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, names...)
	out := map[string]units.Usage{}
	for _, n := range names {
		if u, ok := f.usage[n]; ok {
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
	ids := newIdentities(t, everyone...)
	fu := &fakeUnits{
		list: []units.Status{
			{Name: "flock-agent@1.service", ActiveState: "failed", SubState: "failed"},
			{Name: "flock-agent@2.service", ActiveState: "inactive", SubState: "dead"},
			{Name: "flock-agent@9.service", ActiveState: "active", SubState: "running"}, // not in the config
		},
		usage: map[string]units.Usage{
			"flock-agent@1.service": {Restarts: 5, LastExit: units.Exit{Code: "killed", Status: 31}},
			"flock-agent@2.service": {Restarts: 7},
		},
	}
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{Units: fu})
	connect(t, s, ids, "flock-3")
	op := connect(t, s, ids, OperatorName)

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
	if !slices.Equal(fu.asked, []string{"flock-agent@1.service"}) {
		t.Errorf("usage asked of %v, want only the loaded, not stopped unit of agent 1", fu.asked)
	}
	fu.mu.Unlock()

	fu.mu.Lock()
	fu.err = errors.New("dbus: connection refused")
	fu.mu.Unlock()
	got = s.HostUnits(context.Background())
	if got.Error != "listing the units over D-Bus: dbus: connection refused" || len(got.Agents) != 3 || got.Agents[3].Bus.Connections != 1 {
		t.Errorf("without D-Bus: %+v", got)
	}
}

// Tier: unit. A bus answers for the agents the config places on its own
// host; without a cluster every agent is its own.
func TestLocalAgents(t *testing.T) {
	users := []User{{Name: "flock-1", Agent: 1}, {Name: "flock-2", Agent: 2}, {Name: OperatorName}, {Name: "flock-3", Agent: 3}}
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
