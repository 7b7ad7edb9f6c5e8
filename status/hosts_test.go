package status

import (
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// threeHosts is agents 1 and 2 on a, 3 on b, 4 on c.
func threeHosts(t *testing.T) *spec.Flock {
	t.Helper()
	f, err := spec.Count(4)
	if err != nil {
		t.Fatal(err)
	}
	f.Hosts = []spec.Host{
		{Name: "a", Address: netip.MustParseAddr("10.77.0.11")},
		{Name: "b", Address: netip.MustParseAddr("10.77.0.12")},
		{Name: "c", Address: netip.MustParseAddr("10.77.0.13")},
	}
	for i, h := range []string{"a", "a", "b", "c"} {
		f.Agents[i].Host = h
	}
	return f
}

// Tier: unit. Where status places agents: nowhere on one host; from the
// spec on several, this host from the bus config or else from this
// machine's addresses; from the bus config alone when only it spans hosts.
func TestPlacementOf(t *testing.T) {
	one, err := spec.Count(2)
	if err != nil {
		t.Fatal(err)
	}
	cfgOn := func(server string) *bus.Config {
		return &bus.Config{Cluster: &bus.Cluster{Server: server, Hosts: map[int]string{1: "x", 2: "y"}}}
	}
	if p := PlacementOf(one, &bus.Config{}, nil); p != nil {
		t.Errorf("one host: %+v, want none", p)
	}
	if p := PlacementOf(one, nil, nil); p != nil {
		t.Errorf("one host, no bus config: %+v, want none", p)
	}
	p := PlacementOf(threeHosts(t), cfgOn("b"), nil)
	if p.self != "b" || p.Host(3) != "b" || p.Host(1) != "a" || !slices.Equal(p.Others(), []string{"a", "c"}) || p.Local(1) || !p.Local(3) {
		t.Errorf("three hosts on b: %+v, others %v", p, p.Others())
	}
	onC := func(*spec.Flock) string { return "c" }
	if p := PlacementOf(threeHosts(t), cfgOn("b"), onC); p.self != "b" {
		t.Errorf("the bus config names b, this machine's addresses c: this host is %q", p.self)
	}
	if p := PlacementOf(threeHosts(t), nil, onC); p.self != "c" || !slices.Equal(p.Others(), []string{"a", "b"}) || !p.Local(4) {
		t.Errorf("no bus config, this machine's addresses c: %+v, others %v", p, p.Others())
	}
	p = PlacementOf(one, cfgOn("y"), nil)
	if p.self != "y" || p.Host(1) != "x" || !slices.Equal(p.hosts, []string{"x", "y"}) || !slices.Equal(p.Others(), []string{"x"}) {
		t.Errorf("bus config of two hosts: %+v", p)
	}
	if p := (*Placement)(nil); p.Host(1) != "" || !p.Local(1) {
		t.Error("no placement: every agent is local and has no host")
	}
}

// hostRows is status of threeHosts seen from a: agents 1 and 2 local,
// 3 as b answered, 4 on silent c; and the answers they came from.
func hostRows(t *testing.T) ([]Agent, HostsAnswers) {
	f := threeHosts(t)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	beat, oldBeat := now.Add(-2*time.Second), now.Add(-time.Hour)
	local := &wire.BusStatus{Agents: map[int]wire.AgentOnBus{
		1: {Connections: 1, HeartbeatAt: &beat},
		3: {HeartbeatAt: &beat}, // every bus hears every heartbeat
		4: {HeartbeatAt: &beat},
	}}
	said := HostsAnswers{Got: map[string]wire.HostUnits{"b": {Host: "b", Agents: map[int]wire.AgentUnit{
		3: {Unit: "flock-agent@3.service", ActiveState: "activating", SubState: "auto-restart", Restarts: 4, ExitCode: "exited", ExitStatus: 2,
			Bus: wire.AgentOnBus{Connections: 0, HeartbeatAt: &oldBeat, ViolationsTotal: 1, Violations: map[string]uint64{wire.ViolationPublish: 1}}},
	}}}}
	var rows []Agent
	for i, a := range f.Agents {
		if i < 2 {
			row := Of(f, a, unitOf(wire.AgentUnit{Unit: spec.UnitName(a.ID), ActiveState: "active", SubState: "running"}))
			row.Host = "a"
			row.busFields(local, now)
			rows = append(rows, row)
			continue
		}
		rows = append(rows, remoteRow(f, a, a.Host, said, local, now))
	}
	return rows, said
}

// Tier: unit. The status table of a flock on three hosts, seen from a:
// a HOST column, b's agent as b's bus reported it, c's agent unknown
// because c did not answer; below it, the restart loop names the host
// whose journal tells why.
func TestStatusTableHosts(t *testing.T) {
	rows, _ := hostRows(t)
	var b strings.Builder
	printTable(&b, rows, true)
	printViolations(&b, rows)
	WriteDiagnoses(&b, rows)
	golden.Check(t, filepath.Join("testdata", "status-hosts.golden"), b.String())
}

// Tier: unit. An agent on another host: its unit and bus figures from
// its host's answer, its heartbeat from this host's bus; unknown with
// the reason when its host did not answer, could not be asked, could
// not read its units, or does not count it as its own.
func TestRemoteRow(t *testing.T) {
	rows, said := hostRows(t)
	r := rows[2]
	if r.Host != "b" || r.State != "activating" || r.SubState != "auto-restart" || r.Restarts != 4 || r.LastExit != "exited 2" ||
		r.Bus != "disconnected" || r.Violations != 1 || *r.HeartbeatAgeS != 2 || r.StateNote != "" {
		t.Errorf("agent 3 as b answered: %+v", r)
	}
	if r := rows[3]; r.State != "unknown" || r.StateNote != "host c did not answer" || r.Bus != "unknown" || r.HeartbeatAgeS == nil {
		t.Errorf("agent 4 on silent c: %+v", r)
	}
	f := threeHosts(t)
	now := time.Now()
	said.Got["c"] = wire.HostUnits{Host: "c", Agents: map[int]wire.AgentUnit{4: {Bus: wire.AgentOnBus{Connections: 2}}}, Error: "no D-Bus system bus"}
	if r := remoteRow(f, f.Agents[3], "c", said, nil, now); r.State != "unknown" || r.StateNote != "host c: no D-Bus system bus" || r.Bus != "connected" {
		t.Errorf("c without D-Bus: %+v", r)
	}
	said.Got["c"] = wire.HostUnits{Host: "c", Agents: map[int]wire.AgentUnit{}}
	if r := remoteRow(f, f.Agents[3], "c", said, nil, now); r.State != "unknown" || !strings.Contains(r.StateNote, "host c's bus does not list agent 4") {
		t.Errorf("c without agent 4: %+v", r)
	}
	none := HostsAnswers{AskErr: errors.New("no bus answers flock.bus.units")}
	if r := remoteRow(f, f.Agents[3], "c", none, nil, now); r.StateNote != "host c could not be asked: no bus answers flock.bus.units" {
		t.Errorf("nobody asked: %+v", r)
	}
}

// Tier: unit. JSON rows carry host (and why a state is unknown) only on
// several hosts: on one host the document is as before.
func TestStatusJSONHost(t *testing.T) {
	rows, _ := hostRows(t)
	data, err := json.Marshal(rows[3])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.HasPrefix(s, `{"id":4,"host":"c",`) || !strings.Contains(s, `"state":"unknown","sub_state":"","state_note":"host c did not answer"`) {
		t.Errorf("agent 4 on silent c: %s", s)
	}
	data, _ = json.Marshal(tableRows()[0])
	if s := string(data); strings.Contains(s, `"host"`) || strings.Contains(s, "state_note") || strings.Contains(s, "remote") {
		t.Errorf("one host: %s", s)
	}
}
