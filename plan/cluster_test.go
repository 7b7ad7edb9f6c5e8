package plan

// Tier: unit (no root). A host of a multi-host flock against the fakes:
// users everywhere, the rest only for its own agents, every agent on
// every bus, with keys derived from the flock's secret.

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

const threeHosts = `
hosts:
  - {name: a, address: 10.77.0.11}
  - {name: b, address: 10.77.0.12}
  - {name: c, address: 10.77.0.13}
defaults: {host: a}
agents:
  - {id: 1, role: orchestrator}
  - {id: 2, host: b, command: [/usr/bin/tr, a-z, A-Z]}
  - {id: 3, host: c, command: [/usr/bin/tr, a-z, A-Z]}
  - {id: 4, command: [/bin/cat]}
`

// secret is the flock's (cluster.SecretSize bytes).
var secret = bytes.Repeat([]byte{0x5e}, 32)

// siteOf is host's Site in f, its agents' keys derived from secret.
func siteOf(t *testing.T, f *spec.Flock, host string, secret []byte) Site {
	t.Helper()
	var names []string
	for _, a := range f.Agents {
		names = append(names, spec.UserName(a.ID))
	}
	keys, err := creds.AgentKeys(secret, names)
	if err != nil {
		t.Fatal(err)
	}
	return Site{Host: host, Keys: keys}
}

// provisionOn is provision on one host of a multi-host flock.
func provisionOn(t *testing.T, h Host, f *spec.Flock, s Site) Plan {
	t.Helper()
	return provisionWith(t, h, f, s, units.Options{})
}

// provisionWith is provisionOn with the host's unit options uo.
func provisionWith(t *testing.T, h Host, f *spec.Flock, s Site, uo units.Options) Plan {
	t.Helper()
	ctx := context.Background()
	d := Build(f, s, uo)
	cur, err := Observe(ctx, h, d)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	p := Diff(d, cur)
	if err := Apply(ctx, h, d, p, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return p
}

func clusteredFakes(secret []byte) (Host, fakes) {
	h, fk := newFakes()
	fk.bus.Secret = secret
	return h, fk
}

func TestAHostProvisionsItsOwnAgentsAndKnowsEveryOne(t *testing.T) {
	ctx := context.Background()
	f := mustParse(t, threeHosts)
	h, fk := clusteredFakes(secret)
	p := provisionOn(t, h, f, siteOf(t, f, "a", secret))

	// Users for every agent, the same uids as on every host.
	accts, _ := fk.users.Accounts(ctx)
	if len(accts) != 4 {
		t.Errorf("accounts %+v, want all 4 agents'", accts)
	}
	// Units, directories, seeds and firewall rules for a's agents alone.
	started := fk.units.Started()
	slices.Sort(started)
	if want := []string{spec.UnitName(1), spec.UnitName(4)}; !reflect.DeepEqual(started, want) {
		t.Errorf("started %v, want %v\n%s", started, want, p)
	}
	for _, id := range []int{2, 3} {
		for _, path := range []string{f.AgentDir(id), f.LogPath(id), spec.CredPath(spec.UserName(id))} {
			if _, ok, _ := fk.users.PathState(ctx, path); ok {
				t.Errorf("agent %d (another host's) has %s here", id, path)
			}
		}
	}
	pol, _ := fk.fw.Policy()
	if want := []uint32{f.UID(1), f.UID(4)}; !reflect.DeepEqual(pol.AgentUIDs, want) {
		t.Errorf("firewall for uids %v, want %v", pol.AgentUIDs, want)
	}
	keys, _ := fk.bus.Keys(ctx)
	if _, ok := keys[spec.UserName(2)]; ok || len(keys) != 4 {
		t.Errorf("seeds here %v, want agents 1 and 4's, the reader's and the operator's", keys)
	}

	// The bus lists every agent and every worker, and joins b and c.
	cfg, _ := fk.bus.Config(ctx)
	var users []string
	for _, u := range cfg.Users {
		users = append(users, u.Name)
	}
	if want := []string{"flock-1", "flock-2", "flock-3", "flock-4", creds.ReaderName, creds.OperatorName}; !reflect.DeepEqual(users, want) {
		t.Errorf("bus users %v, want %v", users, want)
	}
	if want := []int{2, 3, 4}; !reflect.DeepEqual(cfg.Tasks.Workers, want) {
		t.Errorf("workers %v, want %v", cfg.Tasks.Workers, want)
	}
	wantCluster := &bus.Cluster{
		Name: "flock", Server: "a", Listen: "10.77.0.11:6222", Routes: []string{"10.77.0.12:6222", "10.77.0.13:6222"},
		Peers: []string{"b", "c"}, Replicas: 3, Hosts: map[int]string{1: "a", 2: "b", 3: "c", 4: "a"},
		CAFile: "/etc/flock/cluster/ca.crt", CertFile: "/etc/flock/cluster/host.crt", KeyFile: "/etc/flock/cluster/host.key",
		PasswordFile: "/etc/flock/cluster/route.password",
	}
	if !reflect.DeepEqual(cfg.Cluster, wantCluster) {
		t.Errorf("cluster\n got %+v\nwant %+v", cfg.Cluster, wantCluster)
	}
	st, _ := fk.units.Service(ctx, units.BusUnit)
	if !slices.Equal(st.File, units.BusService("", "", bus.ConfigPath, ClusterCredentials...)) {
		t.Errorf("flock.service without the cluster's credentials:\n%s", st.File)
	}

	if p := provisionOn(t, h, f, siteOf(t, f, "a", secret)); !p.Empty() {
		t.Errorf("second provision:\n%s", p)
	}
}

// Every host computes every agent's key: host b's bus grants what host
// a's does, to the same keys, and only its own routes and listener differ.
func TestEveryBusKnowsTheSameKeys(t *testing.T) {
	ctx := context.Background()
	f := mustParse(t, threeHosts)
	cfgs := map[string]*bus.Config{}
	for _, host := range []string{"a", "b"} {
		h, fk := clusteredFakes(secret)
		provisionOn(t, h, f, siteOf(t, f, host, secret))
		cfgs[host], _ = fk.bus.Config(ctx)
	}
	a, b := cfgs["a"], cfgs["b"]
	for i := range 4 {
		if !reflect.DeepEqual(a.Users[i], b.Users[i]) {
			t.Errorf("%s on a: %+v\non b: %+v", a.Users[i].Name, a.Users[i], b.Users[i])
		}
	}
	if a.Users[4].Nkey == b.Users[4].Nkey {
		t.Error("the operators of two hosts share a key")
	}
	if b.Cluster.Server != "b" || b.Cluster.Listen != "10.77.0.12:6222" || !reflect.DeepEqual(b.Cluster.Routes, []string{"10.77.0.11:6222", "10.77.0.13:6222"}) {
		t.Errorf("b's cluster %+v", b.Cluster)
	}
	if !reflect.DeepEqual(a.Tasks, b.Tasks) || !reflect.DeepEqual(a.Cluster.Hosts, b.Cluster.Hosts) {
		t.Errorf("tasks or hosts differ:\n%+v %+v\n%+v %+v", a.Tasks, a.Cluster.Hosts, b.Tasks, b.Cluster.Hosts)
	}
}

// A host that ran one flock alone joins a multi-host one: its agents'
// random seeds are replaced by the derived ones and the agents restart
// with them; the bus restarts (its unit file now loads the cluster's
// files).
func TestJoiningAClusterReplacesRandomSeeds(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	provision(t, h, mustParse(t, "agents:\n  - {id: 1, role: orchestrator}\n  - {id: 4, command: [/bin/cat]}\n"))
	fk.bus.Secret = secret
	f := mustParse(t, threeHosts)
	p := provisionOn(t, h, f, siteOf(t, f, "a", secret))
	for _, id := range []int{1, 4} {
		if !slices.Contains(p.Changes, Change{CreateIdentity, spec.UserName(id), "not the key derived from the cluster secret"}) ||
			!slices.Contains(p.Changes, Change{RestartUnit, spec.UnitName(id), "its bus credential is new"}) ||
			!slices.Contains(p.Changes, Change{EnsurePath, spec.CredPath(spec.UserName(id)), "its seed is replaced"}) {
			t.Errorf("agent %d's seed not replaced, handed over and loaded:\n%s", id, p)
		}
	}
	if p.Count(StartBus) != 1 || p.Count(StartUnit) != 0 {
		t.Errorf("want the bus restarted, no other agent started:\n%s", p)
	}
	keys, _ := fk.bus.Keys(ctx)
	if want, _ := creds.AgentKey(secret, "flock-1"); keys["flock-1"] != want {
		t.Errorf("flock-1's key %s, want the derived %s", keys["flock-1"], want)
	}
	if p := provisionOn(t, h, f, siteOf(t, f, "a", secret)); !p.Empty() {
		t.Errorf("second provision:\n%s", p)
	}
}

// Moving an agent to another host stops it here and takes its seed and
// firewall rules; its user stays (every host has every agent's). The bus
// reloads (which desk serves an agent is read at reload); a new cluster
// port restarts it (routes are set up at start).
func TestMovingAnAgentAndThePort(t *testing.T) {
	ctx := context.Background()
	f := mustParse(t, threeHosts)
	h, fk := clusteredFakes(secret)
	provisionOn(t, h, f, siteOf(t, f, "a", secret))

	movedSpec := strings.Replace(threeHosts, "{id: 4,", "{id: 4, host: b,", 1)
	moved := mustParse(t, movedSpec)
	if a4, _ := moved.Agent(4); a4.Host != "b" {
		t.Fatalf("agent 4 on %q", a4.Host)
	}
	p := provisionOn(t, h, moved, siteOf(t, moved, "a", secret))
	want := []Change{
		{StopUnit, spec.UnitName(4), "runs on host b"},
		{RemoveIdentity, spec.UserName(4), "runs on host b"},
		{WriteBusConfig, bus.ConfigPath, "its cluster (hosts, addresses, port, files or agents' hosts) changed"},
		{ReloadBus, units.BusUnit, "its cluster (hosts, addresses, port, files or agents' hosts) changed"},
		{Firewall, "inet flock", "table missing or not as planned"},
	}
	if !reflect.DeepEqual(p.Changes, want) {
		t.Errorf("moving agent 4 to b:\n%s\nwant %v", p, want)
	}
	if accts, _ := fk.users.Accounts(ctx); len(accts) != 4 {
		t.Errorf("accounts %d, want 4", len(accts))
	}

	ported := mustParse(t, "bus: {cluster_port: 7222}\n"+movedSpec)
	p = provisionOn(t, h, ported, siteOf(t, ported, "a", secret))
	if p.Count(StartBus) != 1 || p.Count(WriteBusConfig) != 1 {
		t.Errorf("new cluster port: want the config written and the bus restarted:\n%s", p)
	}
}

// On one host, nothing of this: the zero Site plans as before.
func TestOneHostHasNoCluster(t *testing.T) {
	f := mustParse(t, "hosts: [{name: a, address: 10.77.0.11}]\n"+threeAgents)
	d := Build(f, Site{}, units.Options{})
	if c := d.BusConfig(map[string]string{}); c.Cluster != nil {
		t.Errorf("cluster on one host: %+v", c.Cluster)
	}
	if !slices.Equal(d.Service, units.BusService("", "", bus.ConfigPath)) || len(d.Units) != 3 {
		t.Errorf("one host's service or units differ")
	}
}

// Adding a host is a spec change: on an existing host, the new host's
// agent gets a user (and a key on the bus) but no unit, the bus restarts
// to route to the new host, and the firewall lets it reach the cluster
// port; no agent of this host restarts. The new host plans its own agent.
func TestAddingAHost(t *testing.T) {
	f := mustParse(t, threeHosts)
	h, _ := clusteredFakes(secret)
	provisionOn(t, h, f, siteOf(t, f, "a", secret))

	four := strings.Replace(threeHosts, "  - {name: c, address: 10.77.0.13}\n",
		"  - {name: c, address: 10.77.0.13}\n  - {name: d, address: 10.77.0.14}\n", 1) +
		"  - {id: 5, host: d, command: [/bin/cat]}\n"
	g := mustParse(t, four)
	p := provisionOn(t, h, g, siteOf(t, g, "a", secret))
	for _, want := range []struct {
		kind Kind
		n    int
	}{{CreateUser, 1}, {WriteBusConfig, 1}, {StartBus, 1}, {Firewall, 1}, {StartUnit, 0}, {RestartUnit, 0}, {StopUnit, 0}} {
		if got := p.Count(want.kind); got != want.n {
			t.Errorf("adding host d, on a: %d of %q, want %d:\n%s", got, want.kind, want.n, p)
		}
	}
	d := Build(g, siteOf(t, g, "a", secret), units.Options{})
	c := d.BusConfig(map[string]string{})
	if !slices.Contains(c.Cluster.Routes, "10.77.0.14:6222") || c.Cluster.Hosts[5] != "d" || c.Cluster.Replicas != 3 {
		t.Errorf("a's cluster after adding d: %+v", c.Cluster)
	}
	if again := provisionOn(t, h, g, siteOf(t, g, "a", secret)); len(again.Changes) != 0 {
		t.Errorf("a second provision on a:\n%s", again)
	}

	hd, _ := clusteredFakes(secret)
	p = provisionOn(t, hd, g, siteOf(t, g, "d", secret))
	if p.Count(StartUnit) != 1 || p.Count(CreateUser) != 5 {
		t.Errorf("the new host d: want its one agent started and every agent's user:\n%s", p)
	}
}
