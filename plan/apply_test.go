package plan

// Tier: unit (no root). The apply order is written once (steps): Diff
// sorts by it, Apply walks a plan in it and refuses a plan against it.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// allKinds is every kind of change there is.
var allKinds = []Kind{StopUnit, RemoveUser, RemoveIdentity, CreateUser, CreateGroup, EnsurePath, CreateIdentity,
	WriteBusConfig, InstallBus, StartBus, ReloadBus, InstallCounters, StartCounters, RemoveCounters, EnsureSecrets, WriteProxyConf, InstallProxy, HandOverProxy, StartProxy, ReloadProxy, RemoveProxy,
	Firewall, StartUnit, RestartUnit}

func TestEveryKindHasOneStep(t *testing.T) {
	seen := map[Kind]int{}
	for _, s := range steps {
		for _, k := range s.kinds {
			seen[k]++
		}
	}
	for _, k := range allKinds {
		if seen[k] != 1 {
			t.Errorf("%q is in %d steps, want 1", k, seen[k])
		}
	}
	if len(seen) != len(allKinds) {
		t.Errorf("steps name %d kinds, allKinds %d", len(seen), len(allKinds))
	}
}

// recorder logs the OS calls that change a host, in order, through the
// fakes underneath.
type recorder struct{ calls []string }

func (r *recorder) log(call string) {
	if n := len(r.calls); n == 0 || r.calls[n-1] != call { // a run of one call is one entry
		r.calls = append(r.calls, call)
	}
}

type recUnits struct {
	units.Manager
	r *recorder
}

func (u recUnits) Stop(ctx context.Context, name string) error {
	u.r.log("units.Stop")
	return u.Manager.Stop(ctx, name)
}
func (u recUnits) Start(ctx context.Context, un units.Unit) error {
	u.r.log("units.Start")
	return u.Manager.Start(ctx, un)
}
func (u recUnits) InstallService(ctx context.Context, name string, b []byte) error {
	u.r.log("units.InstallService")
	return u.Manager.InstallService(ctx, name, b)
}
func (u recUnits) RestartService(ctx context.Context, name string) error {
	u.r.log("units.RestartService")
	return u.Manager.RestartService(ctx, name)
}

type recUsers struct {
	users.Host
	r *recorder
}

func (u recUsers) RemoveAccounts(ctx context.Context, names []string) error {
	u.r.log("users.RemoveAccounts")
	return u.Host.RemoveAccounts(ctx, names)
}
func (u recUsers) EnsureAccounts(ctx context.Context, g users.Group, as []users.Account) error {
	u.r.log("users.EnsureAccounts")
	return u.Host.EnsureAccounts(ctx, g, as)
}
func (u recUsers) EnsurePaths(ctx context.Context, ps []users.Path) error {
	u.r.log("users.EnsurePaths")
	return u.Host.EnsurePaths(ctx, ps)
}

type recBus struct {
	bus.Host
	r *recorder
}

func (b recBus) Remove(ctx context.Context, names []string) error {
	b.r.log("bus.Remove")
	return b.Host.Remove(ctx, names)
}
func (b recBus) Ensure(ctx context.Context, name string) (string, bool, error) {
	b.r.log("bus.Ensure")
	return b.Host.Ensure(ctx, name)
}
func (b recBus) WriteConfig(ctx context.Context, c bus.Config) error {
	b.r.log("bus.WriteConfig")
	return b.Host.WriteConfig(ctx, c)
}
func (b recBus) Reload(ctx context.Context) error {
	b.r.log("bus.Reload")
	return b.Host.Reload(ctx)
}

type recFirewall struct {
	netpolicy.Firewall
	r *recorder
}

func (f recFirewall) Ensure(ctx context.Context, p netpolicy.Policy) error {
	f.r.log("firewall.Ensure")
	return f.Firewall.Ensure(ctx, p)
}

func recording(h Host) (Host, *recorder) {
	r := &recorder{}
	return Host{Users: recUsers{h.Users, r}, Units: recUnits{h.Units, r}, Firewall: recFirewall{h.Firewall, r}, Bus: recBus{h.Bus, r}, Proxy: h.Proxy}, r
}

// everyKind is a plan with one change of each kind, in the apply order,
// on a host that already runs threeAgents.
func everyKind(d Desired) Plan {
	return Plan{Changes: []Change{
		{StopUnit, "flock-agent@3.service", ""}, {RemoveUser, "flock-3", ""}, {RemoveIdentity, "flock-3", ""},
		{CreateUser, "flock-1", ""}, {CreateIdentity, "flock-1", ""}, {EnsurePath, d.Paths[0].Path, ""},
		{WriteBusConfig, bus.ConfigPath, ""}, {InstallBus, units.BusUnit, ""}, {StartBus, units.BusUnit, ""},
		{ReloadBus, units.BusUnit, ""}, {InstallCounters, units.CountersSocket, ""}, {StartCounters, units.CountersSocket, ""},
		{Firewall, "inet flock", ""},
		{RestartUnit, "flock-agent@1.service", ""}, {StartUnit, "flock-agent@2.service", ""},
	}}
}

func TestApplyWalksThePlanInOrder(t *testing.T) {
	h, _ := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	d := Build(f, Site{}, units.Options{})
	p := everyKind(d)
	for i := range p.Changes {
		if r := rank(p.Changes[i].Kind); i > 0 && r < rank(p.Changes[i-1].Kind) {
			t.Fatalf("everyKind is out of order at %v", p.Changes[i])
		}
	}
	rh, r := recording(h)
	if err := Apply(context.Background(), rh, d, p, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"units.Stop", "users.RemoveAccounts", "bus.Remove", "users.EnsureAccounts", "bus.Ensure",
		"users.EnsurePaths", "bus.Ensure", "bus.WriteConfig", "units.InstallService", "units.RestartService", "bus.Reload",
		"units.InstallService", "units.RestartService", "firewall.Ensure", "units.Start"}
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
}

func TestApplyRefusesAPlanAgainstTheOrder(t *testing.T) {
	h, _ := newFakes()
	f := mustParse(t, threeAgents)
	provision(t, h, f)
	d := Build(f, Site{}, units.Options{})
	p := everyKind(d)
	slices.Reverse(p.Changes)
	rh, r := recording(h)
	err := Apply(context.Background(), rh, d, p, nil)
	if err == nil || !strings.Contains(err.Error(), "against the apply order") {
		t.Errorf("reversed plan: %v", err)
	}
	if len(r.calls) > 0 {
		t.Errorf("a refused plan changed the host: %v", r.calls)
	}
}

// Diff's plans are in the apply order whatever the host's state.
func TestDiffSortsByTheApplyOrder(t *testing.T) {
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))
	if err := fk.fw.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, next := range []string{
		"agents: [{id: 1}, {id: 2, common: rw}, {id: 3}, {id: 4}]", // one changed, one new, the table gone
		"agents: [{id: 1}, {id: 4}]",                               // two gone, one new
	} {
		want := Build(mustParse(t, next), Site{}, units.Options{})
		cur, err := Observe(context.Background(), h, want)
		if err != nil {
			t.Fatal(err)
		}
		p := Diff(want, cur)
		if p.Empty() {
			t.Errorf("%s: empty plan", next)
		}
		for i := 1; i < len(p.Changes); i++ {
			if rank(p.Changes[i].Kind) < rank(p.Changes[i-1].Kind) {
				t.Errorf("%s: %v after %v", next, p.Changes[i], p.Changes[i-1])
			}
		}
	}
}

// refusingBus is a bus that refuses its new config once.
type refusingBus struct {
	bus.Host
	refuse *bool
}

func (b refusingBus) Reload(ctx context.Context) error {
	if *b.refuse {
		*b.refuse = false
		return errors.New("the bus refused its new config: no")
	}
	return b.Host.Reload(ctx)
}

// A provision that stops part-way says where the host stands, and the
// next one completes it: here the bus refuses the config that adds two
// agents, after it was written.
func TestAFailedApplyIsReportedAndTheNextConverges(t *testing.T) {
	h, fk := newFakes()
	provision(t, h, mustParse(t, threeAgents))
	refuse := true
	h.Bus = refusingBus{h.Bus, &refuse}
	ctx := context.Background()
	grown := Build(mustParse(t, "agents: [{id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]"), Site{}, units.Options{})
	cur, err := Observe(ctx, h, grown)
	if err != nil {
		t.Fatal(err)
	}
	err = Apply(ctx, h, grown, Diff(grown, cur), nil)
	var ae *ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("apply: %v, want an ApplyError", err)
	}
	report := ae.Report()
	for _, want := range []string{
		"stopped at: 1 reload bus\n",
		"done before it: 2 create user, 2 create identity,",
		"not begun: 1 replace firewall, 2 start unit",
		"2 agents may not be running",
		"run the same provision again",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if slices.Contains(fk.units.Started(), spec.UnitName(4)) {
		t.Errorf("agent 4 started although the bus refused its identity")
	}

	// The config file is already right; the running bus is not.
	cur, err = Observe(ctx, h, grown)
	if err != nil {
		t.Fatal(err)
	}
	p := Diff(grown, cur)
	if p.Count(ReloadBus) != 1 || p.Count(StartUnit) != 2 || p.Count(WriteBusConfig) != 0 {
		t.Errorf("next plan:\n%s", p)
	}
	if err := Apply(ctx, h, grown, p, nil); err != nil {
		t.Fatal(err)
	}
	cur, err = Observe(ctx, h, grown)
	if err != nil {
		t.Fatal(err)
	}
	if p := Diff(grown, cur); !p.Empty() {
		t.Errorf("not converged:\n%s", p)
	}
}

func TestSummaryCountsALargePlan(t *testing.T) {
	var p Plan
	for i := 1; i <= 1000; i++ {
		p.Changes = append(p.Changes, Change{CreateUser, spec.UserName(i), "uid"})
	}
	p.Changes = append(p.Changes, Change{Firewall, "inet flock", "table missing"})
	got := p.Summary(40)
	want := "create user      ×1000: flock-1 … flock-1000 (uid)\nreplace firewall ×1: inet flock (table missing)\n"
	if got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
	small := Plan{Changes: p.Changes[:3]}
	if small.Summary(40) != small.String() {
		t.Errorf("a small plan is summed up: %q", small.Summary(40))
	}
}

// A spec of 5000 agents validates, plans and applies (on the fakes): no
// limit of the planner's or the bus config's stands in the way.
func TestFiveThousandAgentsPlan(t *testing.T) {
	f, err := spec.Count(5000)
	if err != nil {
		t.Fatal(err)
	}
	h, fk := newFakes()
	p := provision(t, h, f)
	if p.Count(StartUnit) != 5000 || p.Count(CreateIdentity) != 5002 {
		t.Errorf("plan of 5000: %s", p.Summary(40))
	}
	if n := len(fk.units.Started()); n != 5000 {
		t.Errorf("%d units started, want 5000", n)
	}
	if again := provision(t, h, f); !again.Empty() {
		t.Errorf("second provision of 5000: %s", again.Summary(40))
	}
}
