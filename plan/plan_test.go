package plan

// Tier: unit (no root). The planner against the fakes of every OS boundary.

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

type fakes struct {
	users   *users.Fake
	units   *units.Fake
	fw      *netpolicy.Fake
	bus     *bus.FakeHost
	proxy   *proxy.Fake
	secrets *creds.MaterialFake
}

func newFakes() (Host, fakes) {
	f := fakes{users: users.NewFake(), units: units.NewFake(), fw: netpolicy.NewFake(), bus: bus.NewFakeHost(), proxy: &proxy.Fake{},
		secrets: creds.NewMaterialFake(map[string][]byte{})}
	return Host{Users: f.users, Units: busService{f.units, f.bus}, Firewall: f.fw, Bus: f.bus, Proxy: f.proxy, Secrets: f.secrets}, f
}

// busService is the fake units whose flock.service, when it starts, has
// the fake bus read its config, as the real one does.
type busService struct {
	*units.Fake
	bus *bus.FakeHost
}

func (s busService) RestartService(ctx context.Context, name string) error {
	if err := s.Fake.RestartService(ctx, name); err != nil {
		return err
	}
	if name == units.BusUnit {
		s.bus.Started()
	}
	return nil
}

func mustParse(t *testing.T, yaml string) *spec.Flock {
	t.Helper()
	f, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return f
}

// provision runs one full observe → diff → apply cycle and returns its plan.
func provision(t *testing.T, h Host, f *spec.Flock) Plan {
	t.Helper()
	return provisionOn(t, h, f, Site{})
}

const threeAgents = `
agents:
  - id: 1
  - id: 2
  - id: 3
`

func TestFirstProvisionCreatesEverythingInOrder(t *testing.T) {
	h, fk := newFakes()
	p := provision(t, h, mustParse(t, threeAgents))

	if got := p.Count(CreateUser); got != 3 {
		t.Errorf("create user changes = %d, want 3\n%s", got, p)
	}
	if got := p.Count(StartUnit); got != 3 {
		t.Errorf("start unit changes = %d, want 3\n%s", got, p)
	}
	if p.Count(Firewall) != 1 {
		t.Errorf("want one firewall change\n%s", p)
	}
	// Nothing starts before its user, its directories and its rules exist.
	last := map[Kind]int{}
	for i, c := range p.Changes {
		last[c.Kind] = i
	}
	for i, c := range p.Changes {
		if c.Kind == StartUnit && (i < last[CreateUser] || i < last[EnsurePath] || i < last[Firewall]) {
			t.Errorf("change %d (%s %s) comes before users, paths or firewall\n%s", i, c.Kind, c.Target, p)
		}
	}
	if n := len(fk.units.Started()); n != 3 {
		t.Errorf("units started = %d, want 3", n)
	}
}

func TestSecondProvisionIsANoOp(t *testing.T) {
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	before := len(fk.units.Started())

	p := provision(t, h, f)
	if !p.Empty() {
		t.Fatalf("second provision planned changes:\n%s", p)
	}
	if after := len(fk.units.Started()); after != before {
		t.Errorf("second provision started %d units", after-before)
	}
	if !strings.Contains(p.String(), "nothing to do") {
		t.Errorf("empty plan says %q", p.String())
	}
}

func TestChangingOneAgentRestartsOnlyIt(t *testing.T) {
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))
	before := len(fk.units.Started())

	p := provision(t, h, mustParse(t, `
agents:
  - id: 1
  - id: 2
    limits: {memory: 512M}
  - id: 3
`))
	want := []Change{{RestartUnit, spec.UnitName(2), "configuration changed"}}
	if len(p.Changes) != 1 || p.Changes[0] != want[0] {
		t.Fatalf("plan = %v, want %v", p.Changes, want)
	}
	started := fk.units.Started()[before:]
	if len(started) != 1 || started[0] != spec.UnitName(2) {
		t.Errorf("started %v, want only %s", started, spec.UnitName(2))
	}
}

func TestAddingAnAgentTouchesNoOther(t *testing.T) {
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))
	before := len(fk.units.Started())

	p := provision(t, h, mustParse(t, threeAgents+"  - id: 4\n"))
	started := fk.units.Started()[before:]
	if len(started) != 1 || started[0] != spec.UnitName(4) {
		t.Errorf("started %v, want only %s\n%s", started, spec.UnitName(4), p)
	}
}

func TestAgentDroppedFromSpecIsDeprovisioned(t *testing.T) {
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))

	p := provision(t, h, mustParse(t, "agents:\n  - id: 1\n  - id: 2\n"))
	if p.Count(StopUnit) != 1 || p.Count(RemoveUser) != 1 || p.Count(Firewall) != 1 {
		t.Fatalf("want stop, remove user and firewall for agent 3:\n%s", p)
	}
	// The unit stops before its user and its firewall rules go.
	if p.Changes[0].Kind != StopUnit {
		t.Errorf("first change is %s, want %s\n%s", p.Changes[0].Kind, StopUnit, p)
	}
	sts, _ := fk.units.List(context.Background())
	for _, s := range sts {
		if s.Name == spec.UnitName(3) {
			t.Errorf("%s still loaded", s.Name)
		}
	}
	accts, _ := fk.users.Accounts(context.Background())
	for _, a := range accts {
		if a.Name == spec.UserName(3) {
			t.Errorf("user %s still exists", a.Name)
		}
	}
}

func TestDriftIsRepaired(t *testing.T) {
	ctx := context.Background()
	f := mustParse(t, threeAgents)
	for _, tc := range []struct {
		name  string
		drift func(fakes)
		want  Kind
	}{
		{"unit stopped by hand", func(fk fakes) { _ = fk.units.Stop(ctx, spec.UnitName(2)) }, StartUnit},
		{"firewall table removed", func(fk fakes) { _ = fk.fw.Remove(ctx) }, Firewall},
		{"user deleted", func(fk fakes) { _ = fk.users.RemoveAccounts(ctx, []string{spec.UserName(1)}) }, CreateUser},
		{"directory removed", func(fk fakes) { _ = fk.users.RemovePaths(ctx, []string{f.AgentDir(3)}) }, EnsurePath},
		{"bus stopped by hand", func(fk fakes) { fk.units.StopService() }, StartBus},
		{"bus's user deleted", func(fk fakes) { fk.units.DropAccount(units.BusUnit) }, InstallBus},
		{"bus's user deleted: the bus restarts", func(fk fakes) { fk.units.DropAccount(units.BusUnit) }, StartBus},
		{"bus config deleted", func(fk fakes) { _ = fk.bus.RemoveConfig(ctx) }, WriteBusConfig},
		{"a bus from before bus.sync runs: it restarts to sync always", func(fk fakes) { fk.bus.RunOld() }, StartBus},
		{"counters socket stopped by hand", func(fk fakes) { fk.units.StopStatic(units.CountersSocket) }, StartCounters},
		{"counters reader's template deleted", func(fk fakes) { _ = fk.units.RemoveService(ctx, units.CountersTemplate) }, InstallCounters},
		{"bus's user deleted: the counters socket, its own, restarts", func(fk fakes) { fk.units.DropAccount(units.BusUnit) }, StartCounters},
		{"credential deleted", func(fk fakes) { _ = fk.bus.Remove(ctx, []string{spec.UserName(2)}) }, CreateIdentity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, fk := newFakes()
			provision(t, h, f)
			tc.drift(fk)
			if p := provision(t, h, f); p.Count(tc.want) != 1 {
				t.Fatalf("after %s want one %q change, got:\n%s", tc.name, tc.want, p)
			}
			if p := provision(t, h, f); !p.Empty() {
				t.Fatalf("not converged after repair:\n%s", p)
			}
		})
	}
}

// The bus: identities exist before the config that names them, the bus
// runs before any agent starts, and a new agent reloads it (connections
// kept) rather than restarting it.
func TestBusIsPlannedAroundTheAgents(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	p := provision(t, h, f)
	pos := map[Kind]int{}
	for i, c := range p.Changes {
		if _, seen := pos[c.Kind]; !seen {
			pos[c.Kind] = i
		}
	}
	if p.Count(CreateIdentity) != 5 {
		t.Errorf("want 5 identities (3 agents, the reader, the operator):\n%s", p)
	}
	if !(pos[CreateIdentity] < pos[WriteBusConfig] && pos[WriteBusConfig] < pos[StartBus] && pos[StartBus] < pos[StartUnit]) {
		t.Errorf("order: identities, config, bus, agents; got:\n%s", p)
	}
	cfg, _ := fk.bus.Config(ctx)
	keys, _ := fk.bus.Keys(ctx)
	if cfg == nil || !cfg.Equal(bus.ForFlock(f, keys)) || len(cfg.Users) != 5 {
		t.Fatalf("installed config %+v", cfg)
	}
	if st, _ := fk.units.Service(ctx, units.BusUnit); st.ActiveState != "active" || st.Enabled != "enabled" {
		t.Errorf("bus service %+v", st)
	}

	restarts := fk.units.ServiceRestarts()
	p = provision(t, h, mustParse(t, threeAgents+"  - id: 4\n"))
	if p.Count(ReloadBus) != 1 || p.Count(StartBus) != 0 || fk.units.ServiceRestarts() != restarts || fk.bus.Reloads() != 1 {
		t.Errorf("adding an agent should reload the bus, not restart it:\n%s", p)
	}
	p = provision(t, h, mustParse(t, "bus: {listen: \"127.0.0.1:4333\"}\n"+threeAgents+"  - id: 4\n"))
	if p.Count(StartBus) != 1 || fk.units.ServiceRestarts() != restarts+1 {
		t.Errorf("moving the listener should restart the bus:\n%s", p)
	}
	// nats-server reloads no sync setting: choosing an interval, and
	// going back to always, each restart the bus once.
	for i, sync := range []string{"sync: 1s, ", ""} {
		p = provision(t, h, mustParse(t, "bus: {"+sync+"listen: \"127.0.0.1:4333\"}\n"+threeAgents+"  - id: 4\n"))
		if p.Count(WriteBusConfig) != 1 || p.Count(StartBus) != 1 || p.Count(ReloadBus) != 0 || fk.units.ServiceRestarts() != restarts+2+i {
			t.Errorf("bus: {%s}: the sync policy should restart the bus:\n%s", sync, p)
		}
	}

	// A dropped agent loses its identity and its place in the config.
	p = provision(t, h, mustParse(t, "bus: {listen: \"127.0.0.1:4333\"}\nagents:\n  - id: 1\n"))
	if p.Count(RemoveIdentity) != 3 || p.Count(ReloadBus) != 1 {
		t.Errorf("want 3 identities removed and a reload:\n%s", p)
	}
	if keys, _ := fk.bus.Keys(ctx); len(keys) != 3 {
		t.Errorf("identities left: %v, want agent 1's, the reader's and the operator's", keys)
	}
}

// A credential deleted by hand is made again, and only its agent restarts
// to load it.
func TestRecreatedCredentialRestartsOnlyItsAgent(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	before := len(fk.units.Started())
	_ = fk.bus.Remove(ctx, []string{spec.UserName(3)})
	p := provision(t, h, f)
	if p.Count(RestartUnit) != 1 || p.Count(ReloadBus) != 1 {
		t.Errorf("want agent 3 restarted and the bus reloaded:\n%s", p)
	}
	if started := fk.units.Started()[before:]; len(started) != 1 || started[0] != spec.UnitName(3) {
		t.Errorf("started %v, want only %s", started, spec.UnitName(3))
	}
}

func TestRemoveAllLeavesNothing(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	// What systemd made for flock.service's StateDirectory: the bus's store.
	store := units.BusStateDirs[0] + "/jetstream"
	fk.users.SetPath(users.Path{Path: store, Dir: true, Mode: 0o700})
	// A multi-host flock's material, this host's and the authority's.
	material := []string{cluster.Dir + "/host.key", cluster.AuthorityDir + "/ca.key"}
	for _, p := range material {
		fk.users.SetPath(users.Path{Path: p, Mode: 0o600})
	}
	if err := RemoveAll(ctx, h, f.Root, true); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(material, store) {
		if _, ok, _ := fk.users.PathState(ctx, p); ok {
			t.Errorf("%s still exists", p)
		}
	}
	if sts, _ := fk.units.List(ctx); len(sts) != 0 {
		t.Errorf("units left: %v", sts)
	}
	if accts, _ := fk.users.Accounts(ctx); len(accts) != 0 {
		t.Errorf("accounts left: %v", accts)
	}
	if ok, _ := fk.fw.Matches(ctx, netpolicy.Policy{}); ok {
		t.Errorf("firewall table still present")
	}
	if _, ok, _ := fk.users.PathState(ctx, f.Root); ok {
		t.Errorf("%s still exists", f.Root)
	}
	if keys, _ := fk.bus.Keys(ctx); len(keys) != 0 {
		t.Errorf("identities left: %v", keys)
	}
	if cfg, _ := fk.bus.Config(ctx); cfg != nil {
		t.Errorf("bus config left: %+v", cfg)
	}
	for _, name := range []string{units.BusUnit, units.CountersSocket, units.CountersTemplate} {
		if st, _ := fk.units.Service(ctx, name); st.File != nil {
			t.Errorf("%s left: %+v", name, st)
		}
	}
}

// The firewall counters' reader is there while bus.metrics is on, its
// socket listening and its template written; bus.metrics off takes both
// away, and on again brings them back.
func TestCountersReaderFollowsMetrics(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, threeAgents)
	p := provision(t, h, f)
	if p.Count(InstallCounters) != 1 || p.Count(StartCounters) != 1 || rank(InstallCounters) < rank(InstallBus) {
		t.Errorf("a fresh host: want the counters installed and started after the bus's account:\n%s", p)
	}
	sock, _ := fk.units.Service(ctx, units.CountersSocket)
	tmpl, _ := fk.units.Service(ctx, units.CountersTemplate)
	if sock.ActiveState != "active" || sock.Enabled != "enabled" || string(sock.File) != string(units.CountersSocketUnit()) || tmpl.File == nil {
		t.Errorf("socket %+v, template %+v", sock, tmpl)
	}
	off := mustParse(t, "bus:\n  metrics: off\n"+threeAgents)
	if p := provision(t, h, off); p.Count(RemoveCounters) != 1 {
		t.Errorf("metrics off: %s", p)
	}
	for _, name := range []string{units.CountersSocket, units.CountersTemplate} {
		if st, _ := fk.units.Service(ctx, name); st.File != nil {
			t.Errorf("metrics off: %s left", name)
		}
	}
	if p := provision(t, h, off); p.Count(RemoveCounters) != 0 {
		t.Errorf("metrics off, again: %s", p)
	}
	if p := provision(t, h, f); p.Count(InstallCounters) != 1 || p.Count(StartCounters) != 1 {
		t.Errorf("metrics on again: %s", p)
	}
	// A new flockctl changes neither file: each connection runs the one
	// installed then. One installed elsewhere rewrites the template; the
	// socket keeps listening.
	restarts := fk.units.Restarts(units.CountersSocket)
	for _, tc := range []struct {
		uo      units.Options
		install int
	}{{units.Options{FlockctlBuild: "0123456789ab"}, 0}, {units.Options{FlockctlBin: "/usr/bin/flockctl"}, 1}} {
		d := Build(f, Site{}, tc.uo)
		cur, err := Observe(ctx, h, d)
		if err != nil {
			t.Fatal(err)
		}
		p = Diff(d, cur)
		if err := Apply(ctx, h, d, p, nil); err != nil {
			t.Fatal(err)
		}
		if p.Count(InstallCounters) != tc.install || p.Count(StartCounters) != 0 || fk.units.Restarts(units.CountersSocket) != restarts {
			t.Errorf("%+v: want %d install of the counters, the socket left listening:\n%s", tc.uo, tc.install, p)
		}
	}
}

func TestForeignAccountStopsBeforeAnyChange(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	fk.users.AddForeign(spec.UserName(2), 1001)
	d := Build(mustParse(t, threeAgents), Site{}, units.Options{})
	if _, err := Observe(ctx, h, d); !errors.Is(err, users.ErrNotOurs) {
		t.Fatalf("observe with flock-2 held by someone else: %v, want ErrNotOurs", err)
	}
	if n := len(fk.units.Started()); n != 0 {
		t.Errorf("%d units started", n)
	}
	if accts, _ := fk.users.Accounts(ctx); len(accts) != 0 {
		t.Errorf("accounts created: %v", accts)
	}
}

func TestDriftInAccountsAndACLsIsRepaired(t *testing.T) {
	f := mustParse(t, threeAgents)
	for _, tc := range []struct {
		name  string
		drift func(fakes)
		want  Kind
	}{
		{"shared group deleted", func(fk fakes) { fk.users.RemoveSharedGroup() }, CreateUser},
		{"readers' group deleted", func(fk fakes) { fk.users.DeleteReaders() }, CreateGroup},
		{"reader's seed opened to the world", func(fk fakes) {
			fk.users.SetPath(users.Path{Path: spec.CredPath(creds.ReaderName), GID: 990, Mode: 0o644})
		}, EnsurePath},
		{"default ACL of common removed", func(fk fakes) {
			fk.users.SetPath(users.Path{Path: f.CommonDir(), Dir: true, GID: f.UIDBase, Mode: 0o770 | fs.ModeSetgid})
		}, EnsurePath},
		{"agent dir opened to the world", func(fk fakes) {
			fk.users.SetPath(users.Path{Path: f.AgentDir(2), Dir: true, UID: f.UID(2), GID: f.UID(2), Mode: 0o777})
		}, EnsurePath},
		{"unit failed", func(fk fakes) { fk.units.Fail(spec.UnitName(1)) }, StartUnit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, fk := newFakes()
			provision(t, h, f)
			tc.drift(fk)
			p := provision(t, h, f)
			if p.Count(tc.want) == 0 {
				t.Fatalf("after %s want a %q change, got:\n%s", tc.name, tc.want, p)
			}
			if p := provision(t, h, f); !p.Empty() {
				t.Fatalf("not converged after repair:\n%s", p)
			}
		})
	}
}

// The proxy exists while an agent has a name in its egress: installed and
// started with the agents, reloaded (no agent restarted) when a name is
// added, removed with the last name.
func TestProxyFollowsNames(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))
	if fk.proxy.File != nil {
		t.Fatalf("a flock without names has a proxy config:\n%s", fk.proxy.File)
	}
	if st, _ := fk.units.Service(ctx, units.ProxyUnit); st.File != nil {
		t.Fatal("a flock without names has a proxy unit")
	}

	withName := mustParse(t, "agents:\n  - id: 1\n    egress: [\"api.example.com:443\"]\n  - id: 2\n  - id: 3\n")
	p := provision(t, h, withName)
	for _, k := range []Kind{WriteProxyConf, InstallProxy, StartProxy} {
		if p.Count(k) != 1 {
			t.Errorf("%s: %d changes, want 1\n%s", k, p.Count(k), p)
		}
	}
	if st, _ := fk.units.Service(ctx, units.ProxyUnit); st.ActiveState != "active" || st.Enabled != "enabled" {
		t.Errorf("proxy unit %+v", st)
	}
	c, err := proxy.DecodeConfig(fk.proxy.File)
	if err != nil || len(c.Policy.Agents) != 1 || c.Policy.Agents[withName.UID(1)].ID != 1 || c.Bus != "nats://127.0.0.1:4222" {
		t.Errorf("proxy config %+v %v", c, err)
	}
	// Its bus user publishes its decisions and the model gateway's counts,
	// asks the task desk which tasks a worker holds and answers what a
	// task spent, and nothing else.
	cfg, _ := fk.bus.Config(ctx)
	var pu *bus.User
	for i, u := range cfg.Users {
		if u.Name == creds.ProxyName {
			pu = &cfg.Users[i]
		}
	}
	if pu == nil || strings.Join(pu.Publish, " ") != "flock.bus.leases.* flock.egress.> flock.usage.>" ||
		strings.Join(pu.Subscribe, " ") != "_INBOX.flock-proxy.> flock.proxy.spend.*" || pu.ResponseTTL == 0 || pu.Agent != 0 {
		t.Errorf("the proxy's bus user: %+v", pu)
	}
	if again := provision(t, h, withName); len(again.Changes) != 0 {
		t.Errorf("provision again: %s", again)
	}
	// A stopped proxy is drift (status prints it), repaired by a start.
	fk.units.StopStatic(units.ProxyUnit)
	if p := provision(t, h, withName); p.Count(StartProxy) != 1 || len(p.Changes) != 1 {
		t.Errorf("proxy stopped by hand: %s", p)
	}

	more := mustParse(t, "agents:\n  - id: 1\n    egress: [\"api.example.com:443\", \"*.example.org:443\"]\n  - id: 2\n  - id: 3\n")
	p = provision(t, h, more)
	if p.Count(WriteProxyConf) != 1 || p.Count(ReloadProxy) != 1 || len(p.Changes) != 2 {
		t.Errorf("adding a name: want the config written and the proxy reloaded, nothing else:\n%s", p)
	}
	if fk.units.Reloads(units.ProxyUnit) != 1 || fk.units.Restarts(units.ProxyUnit) != 2 {
		t.Errorf("proxy reloads %d restarts %d, want 1 and 2", fk.units.Reloads(units.ProxyUnit), fk.units.Restarts(units.ProxyUnit))
	}

	// Removing agent 1 (the only one with names) takes the proxy away.
	rest, err := Remove(ctx, h, more, []int{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if fk.proxy.File != nil {
		t.Error("proxy config left after its last agent went")
	}
	if keys, _ := fk.bus.Keys(ctx); keys[creds.ProxyName] != "" {
		t.Error("the proxy's bus identity left after its last agent went")
	}
	if st, _ := fk.units.Service(ctx, units.ProxyUnit); st.File != nil {
		t.Error("proxy unit left after its last agent went")
	}
	if again := provision(t, h, rest); again.Count(RemoveProxy) != 0 || again.Count(StartProxy) != 0 {
		t.Errorf("after Remove: %s", again)
	}

	// Names taken out of the spec: the proxy goes.
	provision(t, h, more)
	p = provision(t, h, mustParse(t, threeAgents))
	if p.Count(RemoveProxy) != 1 || fk.proxy.File != nil {
		t.Errorf("names removed: %s", p)
	}
	if keys, _ := fk.bus.Keys(ctx); keys[creds.ProxyName] != "" {
		t.Error("the proxy's bus identity outlived the proxy")
	}
}

// TestAnUpgradeSaysWhichProgramChanged: programs of another build
// restart the bus and every agent once, and the plan says why: the build
// each runs and the one installed, not "configuration changed".
func TestAnUpgradeSaysWhichProgramChanged(t *testing.T) {
	h, _ := newFakes()
	f := mustParse(t, threeAgents)
	apply := func(o units.Options) Plan {
		t.Helper()
		return provisionWith(t, h, f, Site{}, o)
	}
	apply(units.Options{AgentBuild: "aaaaaaaaaaaa", FlockctlBuild: "bbbbbbbbbbbb"})
	p := apply(units.Options{AgentBuild: "cccccccccccc", FlockctlBuild: "dddddddddddd"})
	want := map[string]string{units.BusUnit: "it runs flockctl build bbbbbbbbbbbb, the installed one is build dddddddddddd"}
	for _, id := range []int{1, 2, 3} {
		want[spec.UnitName(id)] = "it runs flock-agent build aaaaaaaaaaaa, the installed one is build cccccccccccc"
	}
	got := map[string]string{}
	for _, c := range p.Changes {
		if c.Kind == RestartUnit || c.Kind == StartBus {
			got[c.Target] = c.Why
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restarts: %v\nwant %v\n%s", got, want, p)
	}
	if again := apply(units.Options{AgentBuild: "cccccccccccc", FlockctlBuild: "dddddddddddd"}); !again.Empty() {
		t.Errorf("the same programs again: %s", again)
	}
}
