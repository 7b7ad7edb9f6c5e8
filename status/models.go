package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// ModelUse is one agent's use of one model API, as status (its models)
// and flockctl usage show it; its JSON keys are a contract.
type ModelUse struct {
	Agent    int    `json:"agent,omitempty"` // in flockctl usage's list
	Provider string `json:"provider"`
	// Granted: the spec grants it now (a provider no longer granted keeps
	// its counts).
	Granted bool             `json:"granted"`
	Limits  wire.ModelLimits `json:"limits"`
	// Reported: the bus has the proxy's counts (false: none yet, or the
	// bus did not answer; the figures are then zero).
	Reported      bool   `json:"reported"`
	TodayRequests uint64 `json:"today_requests"`
	TodayTokens   uint64 `json:"today_tokens"`
	MonthRequests uint64 `json:"month_requests"`
	MonthTokens   uint64 `json:"month_tokens"`
	Requests      uint64 `json:"requests"`
	wire.Tokens
	// TodayCost, MonthCost and Cost are what today's, this month's and
	// every request cost at their models' prices (an unpriced model's
	// cost nothing), in dollars.
	TodayCost wire.PicoUSD `json:"today_cost_usd"`
	MonthCost wire.PicoUSD `json:"month_cost_usd"`
	Cost      wire.PicoUSD `json:"cost_usd"`
	// Estimated are the requests whose tokens flock estimated (the
	// answer ended before its usage): at least the text that passed.
	Estimated uint64 `json:"estimated_requests,omitempty"`
	// ServerToolUses are the provider-side tools the provider ran, by
	// tool (web_search: 3), each charged beside the tokens.
	ServerToolUses map[string]uint64 `json:"server_tool_uses,omitempty"`
	Errors         map[string]uint64 `json:"errors_by_status,omitempty"`
	Refused        map[string]uint64 `json:"refused_by_limit,omitempty"`
}

// ModelsOf is agent a's use of each provider it is granted or has used,
// in provider order, from the proxy's last report r (nil: none) as of now.
func ModelsOf(a spec.Agent, r *wire.ModelReport, now time.Time) []ModelUse {
	byName := map[string]*ModelUse{}
	for _, g := range a.Models {
		byName[g.Provider] = &ModelUse{Provider: g.Provider, Granted: true, Limits: g.Limits()}
	}
	if r != nil {
		for p, u := range r.Usage {
			m := byName[p]
			if m == nil {
				m = &ModelUse{Provider: p}
				byName[p] = m
			}
			m.Reported = true
			m.TodayRequests, m.TodayTokens = u.Today(now)
			m.MonthRequests, m.MonthTokens = u.ThisMonth(now)
			day, month := u.Windows(now)
			m.TodayCost, m.MonthCost = day.Cost, month.Cost
			m.Requests, m.Tokens, m.Cost = u.Requests, u.Tokens, u.Cost
			m.Errors, m.Refused, m.Estimated, m.ServerToolUses = u.Errors, u.Refused, u.EstimatedRequests, u.ServerToolUses
		}
		for p := range byName {
			if _, ok := r.Usage[p]; !ok {
				byName[p].Reported = true // reported: nothing used yet
			}
		}
	}
	var out []ModelUse
	for _, p := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[p])
	}
	return out
}

// WriteUsage is usage's tables: a row per agent and provider, then the
// budgets and the flock's sum (budgets.go).
func WriteUsage(w io.Writer, u Usage) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPROVIDER\tTODAY\tTHIS MONTH\tREQUESTS\tTOKENS IN/OUT/CACHE\tCOST\tERRORS\tREFUSED\tLIMITS")
	for _, m := range u.Models {
		today, month, cost := "-", "-", "-"
		if m.Reported {
			today = window(m.TodayTokens, m.TodayCost, m.TodayRequests, m.Limits.TokensPerDay, m.Limits.USDPerDay)
			month = window(m.MonthTokens, m.MonthCost, m.MonthRequests, m.Limits.TokensPerMonth, m.Limits.USDPerMonth)
			if m.Cost > 0 {
				cost = m.Cost.String()
			}
		}
		provider := m.Provider
		if !m.Granted {
			provider += " (no longer granted)"
		}
		requests := strconv.FormatUint(m.Requests, 10)
		if m.Estimated > 0 {
			requests += fmt.Sprintf(" (%d estimated)", m.Estimated)
		}
		tokens := count(m.InputTokens) + "/" + count(m.OutputTokens) + "/" + count(m.CacheReadTokens+m.CacheWriteTokens)
		if len(m.ServerToolUses) > 0 {
			// Beside the tokens, what the provider ran for it.
			tokens += " + " + byKey(m.ServerToolUses)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Agent, provider, today, month, requests,
			tokens, cost, byKey(m.Errors), byKey(m.Refused), limitsText(m.Limits))
	}
	tw.Flush()
	writeBudgets(w, u)
}

// window is a day's or a month's cell: "1.20M tokens, $4.10, 310 req (60%
// of 2.00M, 82% of $5.00)", the shares of the limits set (0: none).
func window(tokens uint64, cost wire.PicoUSD, requests, tokenLimit uint64, usdLimit wire.PicoUSD) string {
	return fmt.Sprintf("%s, %d req", spent(tokens, cost), requests) + of(shares(tokens, cost, tokenLimit, usdLimit, ""))
}

// count writes a number of tokens short: 1234567 as 1.23M.
func count(n uint64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + "G"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M"
	case n >= 1e4:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "K"
	}
	return strconv.FormatUint(n, 10)
}

// byKey writes counts by key ("429: 2, cut: 1"), "-" for none.
func byKey(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// limitsText writes a grant's limits as the spec does, "-" for none.
func limitsText(l wire.ModelLimits) string {
	var parts []string
	if l.RequestsPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("requests_per_minute=%d", l.RequestsPerMinute))
	}
	if l.TokensPerDay > 0 {
		parts = append(parts, "tokens_per_day="+count(l.TokensPerDay))
	}
	if l.TokensPerMonth > 0 {
		parts = append(parts, "tokens_per_month="+count(l.TokensPerMonth))
	}
	if l.USDPerDay > 0 {
		parts = append(parts, "usd_per_day="+l.USDPerDay.String())
	}
	if l.USDPerMonth > 0 {
		parts = append(parts, "usd_per_month="+l.USDPerMonth.String())
	}
	if l.Concurrent > 0 {
		parts = append(parts, fmt.Sprintf("concurrent=%d", l.Concurrent))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// modelFields fills a status row's models and secrets from the bus's
// last report, and its budgets from all of them (budgets: the flock's, as
// of now).
func (r *Agent) modelFields(f *spec.Flock, a spec.Agent, st *wire.BusStatus, budgets []BudgetSpend, now time.Time) {
	r.Models = ModelsOf(a, modelReport(st, a.ID), now)
	r.Secrets = SecretsOf(a, modelReport(st, a.ID))
	for _, b := range budgets {
		for _, in := range f.BudgetsOf(a) {
			if in.Name == b.Name {
				r.Budgets = append(r.Budgets, b)
			}
		}
	}
}

// printModels says below the status table what each agent granted a
// model API used today: "models: agent 3: anthropic 1.20M tokens today
// (60% of 2.00M), 2 refused".
func printModels(w io.Writer, rows []Agent) {
	for _, r := range rows {
		var parts []string
		for _, m := range r.Models {
			if !m.Reported {
				parts = append(parts, m.Provider+" (no counts from the proxy yet)")
				continue
			}
			s := fmt.Sprintf("%s %s tokens today", m.Provider, count(m.TodayTokens))
			if m.TodayCost > 0 || m.Limits.USDPerDay > 0 {
				s += ", " + m.TodayCost.String()
			}
			s += of(shares(m.TodayTokens, m.TodayCost, m.Limits.TokensPerDay, m.Limits.USDPerDay, ""))
			if len(m.Refused) > 0 {
				s += ", refused " + byKey(m.Refused)
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "models: agent %d: %s (flockctl usage %d)\n", r.ID, strings.Join(parts, "; "), r.ID)
		}
	}
}
