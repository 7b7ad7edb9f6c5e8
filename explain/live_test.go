package explain

// Tier: unit. The assembly and the drift on fakes: a host exactly as
// planned reports no drift, and each kind of hand-made change is named.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// fakeHost is a host provisioned exactly as d plans, on fakes.
type fakeHost struct {
	units *units.Fake
	fw    *netpolicy.Fake
	users *users.Fake
	perms map[int]wire.Permissions
	d     plan.Desired
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	return newFakeHostFor(t, `agents:
  - id: 1
    egress: ["10.1.2.0/24:443"]
  - id: 2
    role: worker
`)
}

func newFakeHostFor(t *testing.T, specText string) *fakeHost {
	t.Helper()
	f, err := spec.Parse([]byte(specText))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := &fakeHost{units: units.NewFake(), fw: netpolicy.NewFake(), users: users.NewFake(), perms: map[int]wire.Permissions{}, d: plan.Build(f, plan.Site{}, units.Options{})}
	for _, u := range h.d.Units {
		if err := h.units.Start(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.fw.Ensure(ctx, netpolicy.ForFlock(f)); err != nil {
		t.Fatal(err)
	}
	if err := h.users.EnsurePaths(ctx, append(users.Paths(f), users.Seeds(f)...)); err != nil {
		t.Fatal(err)
	}
	for _, v := range h.d.Views() {
		h.perms[v.Agent.ID] = bus.WirePermissions(v.Bus)
	}
	return h
}

func (h *fakeHost) sources() Sources {
	one := 1.3
	return Sources{
		Units: h.units, Firewall: h.fw, Users: h.users,
		Bus: func(ctx context.Context, id int) (wire.Permissions, error) {
			p, ok := h.perms[id]
			if !ok {
				return p, errors.New("no answer")
			}
			return p, nil
		},
		Kernel:   func() Kernel { return KernelFacts("6.12.0", 6) },
		Exposure: func(context.Context, string) Exposure { return Exposure{Score: &one, Rating: "OK"} },
	}
}

func TestLiveAsPlanned(t *testing.T) {
	h := newFakeHost(t)
	r, err := Live(context.Background(), h.sources(), h.d, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Drift) != 0 || len(r.Unread) != 0 {
		t.Errorf("a host as planned: drift %+v, unread %v", r.Drift, r.Unread)
	}
	want := map[string]bool{
		"user flock-1":   r.User == "flock-1" && r.UID == 2000000001,
		"level process":  r.Level == "process" && r.Label == "process isolation with guardrails",
		"egress":         slices.Equal(r.Egress, []string{"10.1.2.0/24:443/tcp"}),
		"unit active":    r.Unit.Loaded && r.Unit.ActiveState == "active",
		"ProtectSystem":  slices.Contains(r.Unit.Properties, Property{Name: "ProtectSystem", Live: "strict", Planned: "strict"}),
		"UMask octal":    slices.Contains(r.Unit.Properties, Property{Name: "UMask", Live: "0077", Planned: "0077"}),
		"its allowance":  slices.Contains(r.Firewall, `meta skuid 2000000001 ip daddr 10.1.2.0/24 ip daddr != @host4 fib daddr type != @hosttypes tcp dport 443 accept comment "egress of uid 2000000001, outside this host"`),
		"the bus rule":   slices.Contains(r.Firewall, `meta skuid @agents ip daddr 127.0.0.1 tcp dport 4222 accept comment "bus"`),
		"its rates":      slices.ContainsFunc(r.Firewall, func(l string) bool { return strings.Contains(l, "@sendrate") }) && slices.ContainsFunc(r.Firewall, func(l string) bool { return strings.Contains(l, "@connectrate") }),
		"nothing else":   len(r.Firewall) == 7,
		"its directory":  slices.ContainsFunc(r.Paths, func(p Path) bool { return p.Path == "/srv/flock/agents/1" && p.Mode == "0700" && p.UID == 2000000001 }),
		"common's ACL":   slices.ContainsFunc(r.Paths, func(p Path) bool { return p.Path == "/srv/flock/common" && p.Mode == "2770" && p.ACL != "" }),
		"not another's":  !slices.ContainsFunc(r.Paths, func(p Path) bool { return strings.Contains(p.Path, "2") }),
		"its seed":       slices.ContainsFunc(r.Paths, func(p Path) bool { return p.Path == spec.CredPath("flock-1") && p.Mode == "0400" }),
		"bus perms":      r.Bus != nil && slices.Contains(r.Bus.Publish.Allow, "agent.1.>"),
		"kernel scopes":  r.Kernel.IPCScopes && r.Kernel.LandlockABI == 6,
		"exposure score": r.Exposure.Score != nil && *r.Exposure.Score == 1.3,
	}
	for what, ok := range want {
		if !ok {
			t.Errorf("report lacks %s: %+v", what, r)
		}
	}
}

func TestLiveUnknownAgent(t *testing.T) {
	h := newFakeHost(t)
	_, err := Live(context.Background(), h.sources(), h.d, 7)
	if !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "flockctl explain -f FILE 7") {
		t.Errorf("agent 7: %v; want ErrUnknownAgent naming the fix", err)
	}
}

// TestLiveDrift: each change made behind flock's back is one drift entry
// (kind and what), and nothing else is reported.
func TestLiveDrift(t *testing.T) {
	gid := uint32(2000000000)
	for _, tc := range []struct {
		name   string
		change func(h *fakeHost)
		want   Drift
	}{
		{"an agent directory chmod 0755", func(h *fakeHost) {
			h.users.SetPath(users.Path{Path: "/srv/flock/agents/1", Dir: true, UID: 2000000001, GID: 2000000001, Mode: 0o755})
		}, Drift{"path", "/srv/flock/agents/1 mode", "0700", "0755"}},
		{"a seed made world-readable", func(h *fakeHost) {
			h.users.SetPath(users.Path{Path: spec.CredPath("flock-1"), UID: 2000000001, GID: 2000000001, Mode: 0o444})
		}, Drift{"path", spec.CredPath("flock-1") + " mode", "0400", "0444"}},
		{"a log given to another", func(h *fakeHost) {
			h.users.SetPath(users.Path{Path: "/srv/flock/logs/1.log", UID: 0, GID: 0, Mode: 0o600})
		}, Drift{"path", "/srv/flock/logs/1.log owner", ownerName(2000000001, 2000000001), ownerName(0, 0)}},
		{"common/ without its ACL", func(h *fakeHost) {
			h.users.SetPath(users.Path{Path: "/srv/flock/common", Dir: true, GID: gid, Mode: 0o770 | fs.ModeSetgid})
		}, Drift{"path", "/srv/flock/common acl", "default:group:2000000000:rwx", "none"}},
		{"its directory gone", func(h *fakeHost) {
			_ = h.users.RemovePaths(context.Background(), []string{"/srv/flock/agents/1"})
		}, Drift{"path", "/srv/flock/agents/1", "present", "missing"}},
		{"a unit started without ProtectSystem", func(h *fakeHost) {
			h.units.SetProperty(spec.UnitName(1), "ProtectSystem", "no")
		}, Drift{"property", "ProtectSystem", "strict", "no"}},
		{"a unit started without ProtectHome", func(h *fakeHost) {
			h.units.SetProperty(spec.UnitName(1), "ProtectHome", nil)
		}, Drift{"property", "ProtectHome", "yes", "(not reported)"}},
		{"a unit's memory limit raised", func(h *fakeHost) {
			h.units.SetProperty(spec.UnitName(1), "MemoryMax", uint64(1<<40))
		}, Drift{"property", "MemoryMax", fmt.Sprint(h0().d.Flock.Agents[0].Limits.MemoryBytes), fmt.Sprint(uint64(1 << 40))}},
		{"the unit stopped", func(h *fakeHost) {
			_ = h.units.Stop(context.Background(), spec.UnitName(1))
		}, Drift{"unit", spec.UnitName(1), "loaded, active", "not loaded"}},
		{"the unit failed", func(h *fakeHost) {
			h.units.Fail(spec.UnitName(1))
		}, Drift{"unit", spec.UnitName(1), "active", "failed/failed"}},
		{"an extra accept rule for its uid", func(h *fakeHost) {
			h.fw.AddRule(2000000001, "meta skuid 2000000001 accept")
		}, Drift{"firewall", "meta skuid 2000000001 accept", "", "meta skuid 2000000001 accept"}},
		{"its allowance gone from the table", func(h *fakeHost) {
			p := netpolicy.ForFlock(h.d.Flock)
			delete(p.Egress, 2000000001)
			_ = h.fw.Ensure(context.Background(), p)
		}, Drift{"firewall", `meta skuid 2000000001 ip daddr 10.1.2.0/24 ip daddr != @host4 fib daddr type != @hosttypes tcp dport 443 accept comment "egress of uid 2000000001, outside this host"`,
			`meta skuid 2000000001 ip daddr 10.1.2.0/24 ip daddr != @host4 fib daddr type != @hosttypes tcp dport 443 accept comment "egress of uid 2000000001, outside this host"`, ""}},
		{"a bus permission widened", func(h *fakeHost) {
			p := h.perms[1]
			p.Subscribe.Allow = append(slices.Clone(p.Subscribe.Allow), ">")
			h.perms[1] = p
		}, Drift{"bus", "subscribe", subscribe1(), subscribe1() + " >"}},
		{"answering requests granted", func(h *fakeHost) {
			p := h.perms[1]
			p.Responses = &wire.Responses{MaxMsgs: 1, Expires: 60e9}
			h.perms[1] = p
		}, Drift{"bus", "responses", "none", "1 answer within 1m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			tc.change(h)
			r, err := Live(context.Background(), h.sources(), h.d, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The policy hash comment changes with the policy: a replaced
			// table shows its deny rule as drift too.
			var got []Drift
			for _, d := range r.Drift {
				if !strings.Contains(d.What, "flock policy") {
					got = append(got, d)
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("drift:\n%+v\nwant exactly\n%+v", got, tc.want)
			}
		})
	}
}

// TestLiveNames: an agent's names are apart from its address allowances,
// with the proxy they go through; a proxy not running while it has names
// is drift, and an agent without names has neither names nor proxy drift.
func TestLiveNames(t *testing.T) {
	const withNames = `agents:
  - id: 1
    egress: ["10.1.2.0/24:443", "api.example.com:443", "*.example.org:8443"]
  - id: 2
`
	proxyDown := Drift{"proxy", units.ProxyUnit, "active (the agent has names)", "inactive"}
	for _, tc := range []struct {
		name        string
		id          int
		proxyActive bool
		egress      []string
		names       []string
		proxy       string
		drift       []Drift
		text        string // a line the text form prints ("" none with "names")
	}{
		{"names, proxy running", 1, true, []string{"10.1.2.0/24:443/tcp"}, []string{"api.example.com:443", "*.example.org:8443"}, "127.0.0.1:4230", nil,
			"# names (through flock-proxy on 127.0.0.1:4230): api.example.com:443 *.example.org:8443"},
		{"names, proxy stopped", 1, false, []string{"10.1.2.0/24:443/tcp"}, []string{"api.example.com:443", "*.example.org:8443"}, "127.0.0.1:4230", []Drift{proxyDown},
			"proxy: flock-proxy.service: want active (the agent has names), have inactive"},
		{"no names, proxy stopped", 2, false, []string{}, []string{}, "", nil, ""},
		{"no names, proxy running", 2, true, []string{}, []string{}, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHostFor(t, withNames)
			if tc.proxyActive {
				_ = h.units.InstallService(context.Background(), units.ProxyUnit, []byte("x"))
				_ = h.units.RestartService(context.Background(), units.ProxyUnit)
			}
			r, err := Live(context.Background(), h.sources(), h.d, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			var drift []Drift
			for _, d := range r.Drift {
				if d.Kind == "proxy" {
					drift = append(drift, d)
				}
			}
			if !slices.Equal(r.Egress, tc.egress) || !slices.Equal(r.Names, tc.names) || r.Proxy != tc.proxy || !slices.Equal(drift, tc.drift) {
				t.Errorf("egress %q names %q proxy %q drift %+v;\nwant egress %q names %q proxy %q drift %+v",
					r.Egress, r.Names, r.Proxy, drift, tc.egress, tc.names, tc.proxy, tc.drift)
			}
			var out strings.Builder
			r.WriteText(&out)
			if tc.text != "" && !strings.Contains(out.String(), tc.text+"\n") {
				t.Errorf("text lacks %q:\n%s", tc.text, out.String())
			}
			if tc.text == "" && strings.Contains(out.String(), "names") {
				t.Errorf("text of an agent without names speaks of names:\n%s", out.String())
			}
		})
	}
}

// subscribe1 is what agent 1 may subscribe to, as planned.
func subscribe1() string { return strings.Join(h0().d.Views()[0].Bus.Subscribe, " ") }

// h0 is the planned flock of newFakeHost, for expected values.
func h0() *fakeHost { return newFakeHost(&testing.T{}) }

// In a multi-host flock the report says where the agent runs.
func TestLiveNamesTheHost(t *testing.T) {
	h := newFakeHostFor(t, "hosts: [{name: a, address: 10.77.0.11}, {name: b, address: 10.77.0.12}]\nagents: [{id: 1, host: a}, {id: 2, host: b}]\n")
	r, err := Live(context.Background(), h.sources(), h.d, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Host == nil || *r.Host != (Host{Name: "b", Address: "10.77.0.12"}) {
		t.Errorf("host %+v", r.Host)
	}
	var b strings.Builder
	r.WriteText(&b)
	if !strings.Contains(b.String(), "\nhost: b (10.77.0.12)\n") {
		t.Errorf("text lacks the host:\n%s", b.String())
	}
	if r, _ := Live(context.Background(), newFakeHost(t).sources(), newFakeHost(t).d, 1); r.Host != nil {
		t.Errorf("one host's report names a host: %+v", r.Host)
	}
}

// TestLiveModels: an agent's grants with their limits and where its SDK
// is pointed; the proxy not running is drift for it too.
func TestLiveModels(t *testing.T) {
	h := newFakeHostFor(t, `providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}
agents:
  - id: 1
    models: {anthropic: {tokens_per_day: 2M, concurrent: 4, server_tools: [web_search]}}
`)
	r, err := Live(context.Background(), h.sources(), h.d, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{{Provider: "anthropic", Kind: "anthropic", BaseURL: "http://127.0.0.1:4230/anthropic", Upstream: "https://api.anthropic.com",
		KeyFile: "/etc/flock/keys/anthropic", ModelLimits: wire.ModelLimits{TokensPerDay: 2e6, Concurrent: 4}, ServerTools: []string{"web_search"}}}
	if !reflect.DeepEqual(r.Models, want) || r.Proxy != "127.0.0.1:4230" {
		t.Errorf("models %+v proxy %q; want %+v", r.Models, r.Proxy, want)
	}
	if !slices.Contains(r.Drift, Drift{"proxy", units.ProxyUnit, "active (the agent has model APIs)", "inactive"}) {
		t.Errorf("drift %+v lacks the proxy's", r.Drift)
	}
	var out strings.Builder
	r.WriteText(&out)
	line := "#   anthropic: anthropic API at https://api.anthropic.com, key /etc/flock/keys/anthropic (flock-proxy's alone); the agent calls http://127.0.0.1:4230/anthropic; limits: tokens_per_day 2000000, concurrent 4; provider-side tools: web_search\n"
	if !strings.Contains(out.String(), line) {
		t.Errorf("text lacks %q:\n%s", line, out.String())
	}
}
