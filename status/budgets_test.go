package status

// Tier: unit.

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

var spendNow = time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC)

// spendFlock: agent 1 (orchestrator) limited to $5 a day of anthropic,
// workers 2 and 3 in budget workers ($20 a day, 500M tokens a month),
// everyone in budget flock ($400 a month), and budget night, whose
// agent 4 has no report yet.
func spendFlock(t *testing.T) *spec.Flock {
	t.Helper()
	f, err := spec.Parse([]byte(`providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}
  - {name: openai, kind: openai, url: "https://api.openai.com/v1", key_file: /etc/flock/keys/openai}
agents:
  - {id: 1, role: orchestrator, models: {anthropic: {usd_per_day: 5, tokens_per_day: 2M}}}
  - {id: 2, models: {anthropic: {}, openai: {usd_per_month: 100}}}
  - {id: 3, models: {anthropic: {}}}
  - {id: 4, models: {openai: {}}}
budgets:
  - {name: workers, roles: [worker], usd_per_day: 20, tokens_per_month: 500M}
  - {name: flock, agents: all, usd_per_month: 400}
  - {name: night, agents: [4], usd_per_day: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// spendBus is the bus's last reports of agents 1 to 3; agent 3's is the
// newest, so its budgets' figures are current (agent 2's older ones are
// not).
func spendBus() *wire.BusStatus {
	usd := func(cents uint64) wire.PicoUSD { return wire.PicoUSD(cents) * wire.USD / 100 }
	use := func(req, day, month uint64, dayCost, monthCost, cost wire.PicoUSD) wire.ModelUsage {
		return wire.ModelUsage{Requests: req, Tokens: wire.Tokens{InputTokens: month / 2, OutputTokens: month / 4, CacheReadTokens: month / 4},
			Cost: cost, DayCost: dayCost, MonthCost: monthCost,
			Day: "2026-04-02", DayRequests: req / 10, DayTokens: day, Month: "2026-04", MonthRequests: req, MonthTokens: month}
	}
	workers := func(day, month wire.PicoUSD) wire.BudgetUse {
		return wire.BudgetUse{Day: wire.Spend{Tokens: 2.1e6, Cost: day}, Month: wire.Spend{Tokens: 30.2e6, Cost: month}, USDPerDay: 20 * wire.USD, TokensPerMonth: 500e6}
	}
	flock := func(month wire.PicoUSD) wire.BudgetUse {
		return wire.BudgetUse{Day: wire.Spend{Tokens: 3.3e6, Cost: usd(1230)}, Month: wire.Spend{Tokens: 40e6, Cost: month}, USDPerMonth: 400 * wire.USD}
	}
	return &wire.BusStatus{Agents: map[int]wire.AgentOnBus{
		1: {Models: &wire.ModelReport{Agent: 1, At: spendNow.Add(-time.Minute),
			Usage:   map[string]wire.ModelUsage{"anthropic": use(310, 1.2e6, 9.8e6, usd(410), usd(6012), usd(6012))},
			Budgets: map[string]wire.BudgetUse{"flock": flock(usd(16000))}}},
		2: {Models: &wire.ModelReport{Agent: 2, At: spendNow.Add(-time.Hour),
			Usage: map[string]wire.ModelUsage{"anthropic": use(200, 1e6, 20e6, usd(600), usd(9000), usd(9000)),
				"openai": use(40, 0.1e6, 1e6, usd(20), usd(2000), usd(2500))},
			Budgets: map[string]wire.BudgetUse{"workers": workers(usd(700), usd(11000)), "flock": flock(usd(17000))}}},
		3: {Models: &wire.ModelReport{Agent: 3, At: spendNow,
			Usage:   map[string]wire.ModelUsage{"anthropic": use(100, 1e6, 9.2e6, usd(200), usd(1028), usd(1028))},
			Budgets: map[string]wire.BudgetUse{"workers": workers(usd(820), usd(12028)), "flock": flock(usd(18040))}}},
	}}
}

// Tier: unit. usage's tables of a flock with money limits and budgets:
// each agent's cost today, this month and in all beside its tokens, a
// grant's dollar limits and its share of them; each budget as its newest
// report says, against its limits (one with no report yet: "-"); and the
// flock's sum. The JSON has the same, under its documented keys.
func TestUsageWithMoney(t *testing.T) {
	f := spendFlock(t)
	u := UsageOf(f, spendBus(), 0, spendNow)
	var b strings.Builder
	WriteUsage(&b, u)
	golden.Check(t, filepath.Join("testdata", "usage-money.golden"), b.String())

	if u.Flock == nil || u.Flock.Today.Cost != 1230*wire.USD/100 || u.Flock.Month.Cost != 18040*wire.USD/100 || u.Flock.Cost != 18540*wire.USD/100 {
		t.Errorf("the flock's sum: %+v", u.Flock)
	}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"today_cost_usd":4.1,"month_cost_usd":60.12,"cost_usd":60.12`,
		`"limits":{"tokens_per_day":2000000,"usd_per_day":5}`,
		`"budgets":[{"name":"workers","roles":["worker"],"reported":true,"day":{"tokens":2100000,"cost_usd":8.2},"month":{"tokens":30200000,"cost_usd":120.28},"tokens_per_month":500000000,"usd_per_day":20}`,
		`{"name":"night","agents":[4],"reported":false,"day":{"tokens":0,"cost_usd":0},"month":{"tokens":0,"cost_usd":0},"usd_per_day":1}`,
		`"flock":{"today":{"tokens":3300000,"cost_usd":12.3},"today_requests":65,"month":{"tokens":40000000,"cost_usd":180.4},"month_requests":650,"requests":650,"tokens":40000000,"cost_usd":185.4}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("usage's JSON lacks %s:\n%s", want, data)
		}
	}
	var back Usage
	if err := json.Unmarshal(data, &back); err != nil || len(back.Budgets) != 3 || back.Budgets[0].Day.Cost != 820*wire.USD/100 || *back.Flock != *u.Flock {
		t.Errorf("read back: %+v, %v", back, err)
	}

	// One agent (a worker): its rows and its budgets, no flock sum.
	one := UsageOf(f, spendBus(), 1, spendNow)
	if len(one.Models) != 1 || len(one.Budgets) != 1 || one.Budgets[0].Name != "flock" || one.Flock != nil {
		t.Errorf("usage 4: %+v", one)
	}
}

// Tier: unit. status's spend line: the flock's cost today and this month,
// each budget with a limit at its share of it (tokens too); nothing when
// no agent has models, or none was reported.
func TestPrintSpend(t *testing.T) {
	f := spendFlock(t)
	st := spendBus()
	budgets := BudgetsOf(f.Budgets, reports(st), spendNow)
	var rows []Agent
	for _, a := range f.Agents {
		var r Agent
		r.modelFields(f, a, st, budgets, spendNow)
		rows = append(rows, r)
	}
	noModels := []Agent{{ID: 1}, {ID: 2}}
	unreported := []Agent{{ID: 1, Models: []ModelUse{{Provider: "anthropic", Granted: true}}}}
	for _, tc := range []struct {
		name    string
		rows    []Agent
		budgets []BudgetSpend
		want    string
	}{
		{"budgets", rows, budgets, "spend: $12.30 today, $180.40 this month (budget workers: 41% of $20.00/day, 6% of 500.00M tokens/month; budget flock: 45% of $400.00/month; budget night: 0% of $1.00/day)\n"},
		{"no budgets", rows, nil, "spend: $12.30 today, $180.40 this month\n"},
		{"no models", noModels, budgets, ""},
		{"no counts yet", unreported, budgets, ""},
	} {
		var b bytes.Buffer
		printSpend(&b, tc.rows, tc.budgets)
		if b.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, b.String(), tc.want)
		}
	}
	// Each row's JSON has the budgets it is in.
	if len(rows[0].Budgets) != 1 || rows[0].Budgets[0].Name != "flock" || len(rows[1].Budgets) != 2 || len(rows[3].Budgets) != 3 || rows[3].Budgets[2].Name != "night" {
		t.Errorf("rows' budgets: %+v", rows)
	}
}

// Tier: unit. A share of a limit is exact and rounded down, for amounts
// whose hundredfold passes 64 bits.
func TestPercent(t *testing.T) {
	for _, tc := range []struct{ used, limit, want uint64 }{
		{1.2e6, 2e6, 60}, {199, 200, 99}, {0, 1, 0}, {3, 1, 300},
		{uint64(17e6 * wire.USD), uint64(18e6 * wire.USD), 94},
	} {
		if got := percent(tc.used, tc.limit); got != tc.want {
			t.Errorf("percent(%d, %d) = %d, want %d", tc.used, tc.limit, got, tc.want)
		}
	}
}
