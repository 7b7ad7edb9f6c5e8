package spec

// Tier: unit.

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestHostsAreRead(t *testing.T) {
	f, err := Parse([]byte(`
hosts:
  - {name: a, address: 10.77.0.11}
  - {name: b, address: 10.77.0.12}
  - {name: c, address: "fd00::13"}
bus: {cluster_port: 7222}
defaults: {host: a}
agents:
  - {id: 1, role: orchestrator}
  - {id: 2, host: b, command: [/usr/bin/tr, a-z, A-Z]}
  - {id: 3, host: c}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{"a", netip.MustParseAddr("10.77.0.11")}, {"b", netip.MustParseAddr("10.77.0.12")}, {"c", netip.MustParseAddr("fd00::13")}}
	if !reflect.DeepEqual(f.Hosts, want) || !f.Clustered() || f.Replicas() != 3 || f.Bus.ClusterPort != 7222 {
		t.Errorf("hosts %+v, clustered %v, replicas %d, cluster port %d", f.Hosts, f.Clustered(), f.Replicas(), f.Bus.ClusterPort)
	}
	for id, host := range map[int]string{1: "a", 2: "b", 3: "c"} {
		if a, _ := f.Agent(id); a.Host != host {
			t.Errorf("agent %d on %q, want %q", id, a.Host, host)
		}
	}
	if on := f.On("b"); len(on) != 1 || on[0].ID != 2 {
		t.Errorf("On(b) = %+v", on)
	}
}

func TestClusterDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml  string
		clustered   bool
		clusterPort int
		host        string // of agent 1
	}{
		{"no hosts: as before", "agents: [{id: 1}]\n", false, 0, ""},
		{"one host: as before", "hosts: [{name: a, address: 10.0.0.1}]\nbus: {cluster_port: 7000}\nagents: [{id: 1, host: a}]\n", false, 0, ""},
		{"two hosts: the default port", "hosts: [{name: a, address: 10.0.0.1}, {name: b, address: 10.0.0.2}]\nagents: {count: 2, host: b}\n", true, DefaultClusterPort, "b"},
		{"the default port moves off a taken one", "hosts: [{name: a, address: 10.0.0.1}, {name: b, address: 10.0.0.2}]\nbus: {listen: \"127.0.0.1:6222\"}\ndefaults: {host: a}\nagents: {count: 2}\n", true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml))
			if tc.clusterPort == 0 && tc.clustered {
				// 6222 is bus.listen's: refused, naming a free one.
				want := "bus.cluster_port: 6222 is also the port of bus.listen; give the cluster its own port, e.g. cluster_port: 6223"
				if err == nil || err.Error() != want {
					t.Fatalf("error %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a, _ := f.Agent(1)
			if f.Clustered() != tc.clustered || f.Bus.ClusterPort != tc.clusterPort || a.Host != tc.host {
				t.Errorf("clustered %v, cluster port %d, agent 1 on %q", f.Clustered(), f.Bus.ClusterPort, a.Host)
			}
		})
	}
}
