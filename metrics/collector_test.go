package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// fakeBus is a bus whose Snapshot is given.
type fakeBus struct {
	snap bus.Snapshot
	err  error
}

func (b fakeBus) Snapshot(context.Context) (bus.Snapshot, error) { return b.snap, b.err }

// fakeFirewall is the counters reader: its answer is given, its reads
// counted.
type fakeFirewall struct {
	refused map[uint32]netpolicy.Refusals
	err     error
	reads   int
}

func (f *fakeFirewall) Refused(context.Context) (map[uint32]netpolicy.Refusals, error) {
	f.reads++
	return f.refused, f.err
}

// someRefused: agent 1 sent 20 refused packets, 5 of them logged; no
// other agent any. A uid that is no agent's is not exported.
func someRefused() *fakeFirewall {
	return &fakeFirewall{refused: map[uint32]netpolicy.Refusals{
		spec.DefaultUIDBase + 1: {Refused: 20, Logged: 5},
		spec.DefaultUIDBase + 9: {Refused: 1, Logged: 1},
	}}
}

// brokenUnits is a systemd that cannot be reached.
type brokenUnits struct{}

func (brokenUnits) List(context.Context) ([]units.Status, error) {
	return nil, units.ErrNoSystemBus
}

func (brokenUnits) Usage(context.Context, []string) (map[string]units.Usage, error) {
	return nil, units.ErrNoSystemBus
}

func (brokenUnits) ActiveState(context.Context, string) (string, error) {
	return "", units.ErrNoSystemBus
}

var scrapeTime = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)

// threeAgents: 1 runs (restarted twice, last killed by SIGKILL), 2
// failed (a JIT without jit: true, killed by SIGTRAP: a wall's kill), 3
// has no unit loaded; the bus knows all three; flock-proxy.service runs. Agent 1 used a model API
// (its tokens and their cost, within a dollar limit), in budgets workers
// and flock, and its tasks' spend (one ran out of its budget) is counted;
// it sent its secret github, one request refused by its rules. Agent 2's
// secret search was refused twice toward a host it is not bound to.
func threeAgents() (bus.Snapshot, *units.Fake) {
	snap := bus.Snapshot{
		Agents: map[int]bus.AgentCounts{
			1: {HeartbeatAt: scrapeTime.Add(-2500 * time.Millisecond), Connections: 1, TasksOK: 7, TasksFailed: 1,
				TaskSpend:  bus.TaskSpendTotal{Cost: 38 * wire.USD / 100, Tokens: 41200, OutOfBudget: 1},
				Violations: map[string]uint64{"publish": 3, "forged-lease": 1, "connections": 2}, Egress: map[string]uint64{"allow": 4, "deny": 12},
				Models: &wire.ModelReport{Agent: 1, At: scrapeTime, Usage: map[string]wire.ModelUsage{"anthropic": {
					Requests: 9, Tokens: wire.Tokens{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 4000, CacheWriteTokens: 100},
					Errors: map[string]uint64{"529": 1, "cut": 1}, Refused: map[string]uint64{"tokens_per_day": 2},
					ServerToolUses: map[string]uint64{"web_search": 5, "web_fetch": 1},
					LatencyBuckets: []uint64{0, 1, 2, 3, 1, 1, 0, 1, 0, 0, 0, 0}, LatencySeconds: 21.5,
					Cost: 1234567 * wire.USD / 1e6, DayCost: 4 * wire.USD / 10, MonthCost: 12 * wire.USD / 10,
					Day: "2026-11-27", DayRequests: 4, DayTokens: 2500, Month: "2026-11", MonthRequests: 9, MonthTokens: 5600}},
					Limit: map[string]wire.ModelLimits{"anthropic": {RequestsPerMinute: 60, TokensPerDay: 2500, USDPerDay: wire.USD / 2}},
					Budgets: map[string]wire.BudgetUse{
						"workers": {Day: wire.Spend{Tokens: 2500, Cost: 4 * wire.USD / 10}, Month: wire.Spend{Tokens: 5600, Cost: 12 * wire.USD / 10}, USDPerDay: 20 * wire.USD, TokensPerMonth: 500e6},
						"flock":   {Day: wire.Spend{Tokens: 2500, Cost: 4 * wire.USD / 10}, Month: wire.Spend{Tokens: 5600, Cost: 12 * wire.USD / 10}, USDPerMonth: 400 * wire.USD}},
					Secrets: map[string]wire.SecretUse{"github": {Requests: 12, Refused: map[string]uint64{wire.SecretRefusedRule: 1}}}}},
			// Agent 2's last report is older: budget flock is agent 1's.
			// It is granted a secret, and no model API.
			2: {HeartbeatAt: scrapeTime.Add(-time.Minute), Models: &wire.ModelReport{Agent: 2, At: scrapeTime.Add(-time.Hour),
				Budgets: map[string]wire.BudgetUse{"flock": {Day: wire.Spend{Tokens: 100, Cost: wire.USD / 10}, USDPerMonth: 400 * wire.USD}},
				Secrets: map[string]wire.SecretUse{"search": {Refused: map[string]uint64{wire.SecretRefusedUnbound: 2}}}}},
			3: {},
		},
		Connections:  3,
		TasksPending: 2, TasksRunning: 1, TasksDead: 1,
		StoreBytes: 123456, StoreMax: 1 << 30,
		Streams: map[string]bus.StreamBytes{"TASKS": {Bytes: 4096, Max: 1 << 29}, "RESULTS": {Bytes: 118000, Max: 3 << 27}, "DEAD": {Bytes: 1360, Max: 7 << 24}},
		UIDBase: spec.DefaultUIDBase,
	}
	u := units.NewFake()
	ctx := context.Background()
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n  - id: 2\n  - id: 3\n"))
	if err != nil {
		panic(err)
	}
	for _, a := range f.Agents[:2] {
		if err := u.Start(ctx, units.ForAgent(f, a, units.Options{})); err != nil {
			panic(err)
		}
	}
	if err := u.InstallService(ctx, units.ProxyUnit, units.ProxyService("", "", "", "", units.ProxySecrets{})); err != nil {
		panic(err)
	}
	if err := u.RestartService(ctx, units.ProxyUnit); err != nil {
		panic(err)
	}
	u.SetExit("flock-agent@1.service", 2, units.Exit{Code: "killed", Status: 9})
	mem, peak, cpu := uint64(48<<20), uint64(64<<20), uint64(1_500_000_000)
	u.SetUsage("flock-agent@1.service", units.Usage{MemoryBytes: &mem, MemoryPeak: &peak, CPUNSec: &cpu})
	u.SetExit("flock-agent@2.service", 5, units.Exit{Code: "killed", Status: 5}) // SIGTRAP
	u.Fail("flock-agent@2.service")
	return snap, u
}

// exposition is what Prometheus reads from c: the text format, as the
// handler writes it.
func exposition(t *testing.T, c *Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	rec := httptest.NewRecorder()
	handlerFor(reg, t.Logf).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", Path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestExpositionGolden shows every family as Prometheus reads it, from
// fakes: each source answering, each one failing, and a systemd without
// cgroup accounting.
//
// Tier: unit (no root); promtool (Debian's prometheus) checks each one.
func TestExpositionGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func() (Bus, Units, Firewall)
	}{
		{"three-agents", func() (Bus, Units, Firewall) { s, u := threeAgents(); return fakeBus{snap: s}, u, someRefused() }},
		// Host a's bus in a flock on a, b and c; c does not answer.
		{"cluster", func() (Bus, Units, Firewall) {
			s, u := threeAgents()
			s.Peers = map[string]bool{"b": true, "c": false}
			return fakeBus{snap: s}, u, someRefused()
		}},
		{"no-accounting", func() (Bus, Units, Firewall) {
			s, u := threeAgents()
			u.SetUsage("flock-agent@1.service", units.Usage{})
			return fakeBus{snap: s}, u, someRefused()
		}},
		{"systemd-unreachable", func() (Bus, Units, Firewall) {
			s, _ := threeAgents()
			return fakeBus{snap: s}, brokenUnits{}, someRefused()
		}},
		// The bus fills its own counts before the stream infos that failed.
		{"streams-unreadable", func() (Bus, Units, Firewall) {
			s, u := threeAgents()
			return fakeBus{snap: s, err: errors.New("reading stream TASKS: timeout")}, u, someRefused()
		}},
		{"bus-unreachable", func() (Bus, Units, Firewall) {
			_, u := threeAgents()
			return fakeBus{err: errors.New("not started")}, u, someRefused()
		}},
		// flock-counters.socket is not there (bus.metrics was off, or
		// someone stopped it): the refusals alone are missing.
		{"firewall-unreachable", func() (Bus, Units, Firewall) {
			s, u := threeAgents()
			return fakeBus{snap: s}, u, &fakeFirewall{err: errors.New("dial unix /run/flock-counters.sock: connect: no such file or directory")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, u, fw := tc.setup()
			var logged []string
			c := New(b, u, fw, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
			c.now = func() time.Time { return scrapeTime }
			got := exposition(t, c)
			golden.Check(t, filepath.Join("testdata", tc.name+".prom"), got)
			promtoolCheck(t, got)
			// A failing source is logged once, not at every scrape.
			first := len(logged)
			exposition(t, c)
			if strings.Contains(tc.name, "unr") && (first == 0 || len(logged) != first) {
				t.Errorf("logged %d lines at the first scrape and %d at the second, want some, then none: %q", first, len(logged)-first, logged)
			}
		})
	}
}

// TestFirewallReadsAreShared: scrapes within firewallEvery share one
// read of the firewall (each starts a process with CAP_NET_ADMIN); a
// scrape after it reads again.
func TestFirewallReadsAreShared(t *testing.T) {
	s, u := threeAgents()
	fw := someRefused()
	c := New(fakeBus{snap: s}, u, fw, t.Logf)
	now := scrapeTime
	c.now = func() time.Time { return now }
	for range 3 {
		exposition(t, c)
	}
	if fw.reads != 1 {
		t.Errorf("three scrapes at once read the firewall %d times, want 1", fw.reads)
	}
	now = now.Add(firewallEvery)
	if out := exposition(t, c); fw.reads != 2 || !strings.Contains(out, `flock_agent_refused_packets_total{agent="1"} 20`) {
		t.Errorf("a scrape %v later: %d reads, want 2", firewallEvery, fw.reads)
	}
}

// TestRefusedNeedsTheUIDBase: a bus config an older flockctl wrote has no
// uid_base; the refusals are left out, and the log says to provision.
func TestRefusedNeedsTheUIDBase(t *testing.T) {
	s, u := threeAgents()
	s.UIDBase = 0
	var logged []string
	c := New(fakeBus{snap: s}, u, someRefused(), func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	out := exposition(t, c)
	if strings.Contains(out, "flock_agent_refused_packets_total{") || !strings.Contains(out, `flock_collector_success{source="firewall"} 0`) {
		t.Errorf("no uid_base, yet:\n%s", out)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "flockctl provision") {
		t.Errorf("logged %q, want the fix", logged)
	}
}

// proxyUnreadable is a systemd that lists the agents' units but cannot
// say flock-proxy.service's state.
type proxyUnreadable struct{ *units.Fake }

func (proxyUnreadable) ActiveState(context.Context, string) (string, error) {
	return "", errors.New("ListUnitsByPatterns flock-proxy.service: timeout")
}

// TestProxyUp: flock_proxy_up is 1 while flock-proxy.service is active, 0
// when it is not, and absent when the host has no such unit or systemd
// cannot say (then collector_success says so, and the agents' figures
// stay).
// Tier: unit (no root).
func TestProxyUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		units     func(*units.Fake) Units
		want      string // the flock_proxy_up line; "": none
		systemdOK bool
	}{
		{"active", func(u *units.Fake) Units { return u }, "flock_proxy_up 1", true},
		{"stopped by hand", func(u *units.Fake) Units { u.StopStatic(units.ProxyUnit); return u }, "flock_proxy_up 0", true},
		{"no unit", func(u *units.Fake) Units {
			if err := u.RemoveService(context.Background(), units.ProxyUnit); err != nil {
				t.Fatal(err)
			}
			return u
		}, "", true},
		{"systemd cannot say", func(u *units.Fake) Units { return proxyUnreadable{u} }, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u := threeAgents()
			out := exposition(t, New(fakeBus{snap: s}, tc.units(u), nil, t.Logf))
			var got string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "flock_proxy_up ") {
					got = l
				}
			}
			if got != tc.want {
				t.Errorf("flock_proxy_up line %q, want %q", got, tc.want)
			}
			success := fmt.Sprintf(`flock_collector_success{source="systemd"} %d`, map[bool]int{false: 0, true: 1}[tc.systemdOK])
			if !strings.Contains(out, success) || !strings.Contains(out, `flock_agent_up{agent="1"} 1`) {
				t.Errorf("want %q and agent 1 up in:\n%s", success, out)
			}
		})
	}
}

// promtoolCheck runs `promtool check metrics` (Prometheus's own linter:
// names, units, _total on counters, HELP) on an exposition.
func promtoolCheck(t *testing.T, expo string) {
	t.Helper()
	tier.RequireNeeds(t, "unit, promtool", tier.Program("promtool", "prometheus"))
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(expo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// TestLogsARecovery: a source that answers again is said to, once.
func TestLogsARecovery(t *testing.T) {
	s, u := threeAgents()
	b := &fakeBus{snap: s, err: errors.New("down")}
	var logged []string
	c := New(b, u, nil, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	c.Collect(make(chan prometheus.Metric, 100))
	b.err = nil
	c.Collect(make(chan prometheus.Metric, 100))
	c.Collect(make(chan prometheus.Metric, 100))
	if len(logged) != 2 || !strings.Contains(logged[0], "down") || !strings.Contains(logged[1], "works again") {
		t.Errorf("logged %q, want the failure then the recovery", logged)
	}
}

// TestHandlerServesTheProcessToo: the served handler adds the Go
// runtime's and the process's own metrics to flock's.
func TestHandlerServesTheProcessToo(t *testing.T) {
	s, u := threeAgents()
	srv := httptest.NewServer(Handler(New(fakeBus{snap: s}, u, someRefused(), t.Logf)))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	for _, want := range []string{`flock_agent_up{agent="1"} 1`, "go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	promtoolCheck(t, b.String())
}

// TestListen serves Path, nothing else, and says which field to change
// when the port is taken.
func TestListen(t *testing.T) {
	s, u := threeAgents()
	ms, err := Listen("127.0.0.1:0", Handler(New(fakeBus{snap: s}, u, someRefused(), t.Logf)))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{Path: http.StatusOK, "/": http.StatusNotFound} {
		resp, err := http.Get("http://" + ms.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := Listen(taken.Addr().String(), http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "bus.metrics") {
		t.Errorf("Listen on a taken port: %v, want an error naming bus.metrics", err)
	}
	if err := ms.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// BenchmarkScrape is one scrape of 100 and of 1000 running agents from
// fakes: the collector's and the encoder's share of a scrape (systemd's
// round trips are TestThousandAgents').
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			snap := bus.Snapshot{Agents: map[int]bus.AgentCounts{}, StoreMax: 1 << 30, UIDBase: spec.DefaultUIDBase}
			fw := &fakeFirewall{refused: map[uint32]netpolicy.Refusals{}}
			u := units.NewFake()
			mem := uint64(32 << 20)
			for id := 1; id <= n; id++ {
				name := fmt.Sprintf("flock-agent@%d.service", id)
				if err := u.Start(context.Background(), units.Unit{Name: name}); err != nil {
					b.Fatal(err)
				}
				u.SetUsage(name, units.Usage{MemoryBytes: &mem, MemoryPeak: &mem, CPUNSec: &mem})
				snap.Agents[id] = bus.AgentCounts{HeartbeatAt: time.Now(), Connections: 1, Violations: map[string]uint64{"publish": 1}}
				fw.refused[spec.DefaultUIDBase+uint32(id)] = netpolicy.Refusals{Refused: 7, Logged: 5}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(New(fakeBus{snap: snap}, u, fw, b.Logf))
			h := handlerFor(reg, b.Logf)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
