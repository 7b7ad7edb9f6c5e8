package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockrun/flock/wire"
)

// The model gateway's figures: flock-proxy counts every request an agent
// makes to a model API (kept on disk, so the counters survive restarts
// of the proxy and of the bus) and reports them on the bus.
var (
	modelRequests = desc("agent_model_requests_total",
		"Requests the agent made to the provider through flock-proxy's model gateway, forwarded (refusals are flock_agent_model_refused_total).", "agent", "provider")
	modelTokens = desc("agent_model_tokens_total",
		"Tokens the provider reported for the agent's requests, by kind: input (not from the cache), output, cache_read, cache_write.", "agent", "provider", "kind")
	modelErrors = desc("agent_model_errors_total",
		"The agent's requests that failed, by status: the provider's status (400 and up), 502 when flock could not reach it, 499 when the client left first, cut when the answer ended early, no-usage when a whole answer reported none.", "agent", "provider", "status")
	modelEstimated = desc("agent_model_estimated_requests_total",
		"The agent's requests whose tokens flock estimated, because the answer ended before the provider reported its usage (cut short by the client or the provider, or a provider that reports none): counted at least as the text that passed.", "agent", "provider")
	modelServerTools = desc("agent_model_server_tool_uses_total",
		"Provider-side tools the provider ran for the agent's requests (web_search, web_fetch, code_execution, mcp, file_search, image_generation), each charged beside the tokens, by tool.", "agent", "provider", "tool")
	modelRefused = desc("agent_model_refused_total",
		"Requests the gateway refused itself because the agent was over a limit of its grant, by limit.", "agent", "provider", "limit")
	modelDuration = desc("agent_model_request_duration_seconds",
		"How long the agent's requests took, from the request to the end of the answer.", "agent", "provider")
	modelWindow = desc("agent_model_window_tokens",
		"Tokens the agent used of the provider in the current window (day or month, UTC), which tokens_per_day and tokens_per_month limit.", "agent", "provider", "window")
	modelLimit = desc("agent_model_limit",
		"A limit of the agent's grant in force (absent: none), by limit; usd_per_day and usd_per_month in dollars.", "agent", "provider", "limit")
	modelCost = desc("agent_model_cost_usd_total",
		"What the agent's requests to the provider cost at their models' prices, in dollars (an unpriced model's requests cost nothing).", "agent", "provider")
	modelWindowCost = desc("agent_model_window_cost_usd",
		"What the agent's requests to the provider cost in the current window (day or month, UTC), which usd_per_day and usd_per_month limit, in dollars.", "agent", "provider", "window")
	budgetSpent = desc("budget_spent",
		"What a budget's agents spent together in the current window (day or month, UTC), in dollars (unit usd) or tokens, as the newest report of any of them says.", "budget", "window", "unit")
	budgetLimit = desc("budget_limit",
		"A budget's limit per window (day or month, UTC), in dollars (unit usd) or tokens; absent: none.", "budget", "window", "unit")
)

var modelDescs = []*prometheus.Desc{modelRequests, modelTokens, modelErrors, modelEstimated, modelServerTools, modelRefused, modelDuration, modelWindow,
	modelLimit, modelCost, modelWindowCost, budgetSpent, budgetLimit, secretRequests, secretRefused}

// collectModels sends agent a's model figures from its last report.
func (c *Collector) collectModels(ch chan<- prometheus.Metric, a string, r *wire.ModelReport) {
	if r == nil {
		return
	}
	now := c.now()
	for p, u := range r.Usage {
		ch <- counter(modelRequests, float64(u.Requests), a, p)
		for i, n := range u.Tokens.ByKind() {
			ch <- counter(modelTokens, float64(n), a, p, wire.TokenKinds[i])
		}
		ch <- counter(modelEstimated, float64(u.EstimatedRequests), a, p)
		for tool, n := range u.ServerToolUses {
			ch <- counter(modelServerTools, float64(n), a, p, tool)
		}
		for status, n := range u.Errors {
			ch <- counter(modelErrors, float64(n), a, p, status)
		}
		for limit, n := range u.Refused {
			ch <- counter(modelRefused, float64(n), a, p, limit)
		}
		buckets, cum := map[float64]uint64{}, uint64(0)
		for i, bound := range wire.LatencyBounds {
			if i < len(u.LatencyBuckets) {
				cum += u.LatencyBuckets[i]
			}
			buckets[bound] = cum
		}
		if n := len(u.LatencyBuckets); n == len(wire.LatencyBounds)+1 {
			cum += u.LatencyBuckets[n-1]
		}
		ch <- prometheus.MustNewConstHistogram(modelDuration, cum, u.LatencySeconds, buckets, a, p)
		day, month := u.Windows(now)
		ch <- gauge(modelWindow, float64(day.Tokens), a, p, "day")
		ch <- gauge(modelWindow, float64(month.Tokens), a, p, "month")
		ch <- counter(modelCost, u.Cost.Dollars(), a, p)
		ch <- gauge(modelWindowCost, day.Cost.Dollars(), a, p, "day")
		ch <- gauge(modelWindowCost, month.Cost.Dollars(), a, p, "month")
	}
	for p, l := range r.Limit {
		for limit, v := range map[string]float64{"requests_per_minute": float64(l.RequestsPerMinute), "tokens_per_day": float64(l.TokensPerDay),
			"tokens_per_month": float64(l.TokensPerMonth), "usd_per_day": l.USDPerDay.Dollars(), "usd_per_month": l.USDPerMonth.Dollars(),
			"concurrent": float64(l.Concurrent)} {
			if v > 0 {
				ch <- gauge(modelLimit, v, a, p, limit)
			}
		}
	}
}

// collectBudgets sends each budget's spend of the current windows and its
// limits, as the newest report of any of its agents says.
func collectBudgets(ch chan<- prometheus.Metric, reports []wire.ModelReport, now time.Time) {
	for name, b := range wire.BudgetsNow(reports, now) {
		for _, w := range []struct {
			window string
			spent  wire.Spend
			tokens uint64
			usd    wire.PicoUSD
		}{{"day", b.Day, b.TokensPerDay, b.USDPerDay}, {"month", b.Month, b.TokensPerMonth, b.USDPerMonth}} {
			ch <- gauge(budgetSpent, w.spent.Cost.Dollars(), name, w.window, "usd")
			ch <- gauge(budgetSpent, float64(w.spent.Tokens), name, w.window, "tokens")
			if w.usd > 0 {
				ch <- gauge(budgetLimit, w.usd.Dollars(), name, w.window, "usd")
			}
			if w.tokens > 0 {
				ch <- gauge(budgetLimit, float64(w.tokens), name, w.window, "tokens")
			}
		}
	}
}
