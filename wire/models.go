package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The model gateway's counts: flock-proxy meters every request an agent
// makes to a model API it is granted, keeps the counts on disk, and
// publishes each agent's whole counts (never a difference, so a lost
// message loses nothing) on flock.usage.<id> after they change and when it
// (re)connects. The same report carries what the proxy did with the
// agent's secrets (SecretUse), counted in memory. The bus keeps the last
// of each agent for /metrics and flockctl status; only the proxy
// publishes there.

// UsageSubjects are the proxy's reports, one subject per agent.
const UsageSubjects = "flock.usage.>"

// UsageSubject is where the proxy publishes agent id's counts.
func UsageSubject(id int) string { return "flock.usage." + strconv.Itoa(id) }

// LatencyBounds are the upper bounds, in seconds, of the buckets a
// request's duration is counted in (the last bucket, beyond them, is
// +Inf): from a short answer to a long agentic turn.
var LatencyBounds = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// ModelUsage is one agent's use of one provider: since its first request
// (the totals), today and this month (UTC), and what flock refused it.
type ModelUsage struct {
	Requests uint64 `json:"requests"` // forwarded to the provider
	Tokens
	// Errors are the provider's answers of status 400 and up, and the
	// proxy's own 502 when it could not reach it, by status.
	Errors map[string]uint64 `json:"errors_by_status,omitempty"`
	// Refused are the requests flock answered itself, by limit
	// (requests_per_minute, tokens_per_day, ...): never forwarded.
	Refused map[string]uint64 `json:"refused_by_limit,omitempty"`
	// LatencyBuckets count requests by duration (request to the end of
	// the answer): one per LatencyBounds, then +Inf; not cumulative.
	LatencyBuckets []uint64 `json:"latency_buckets"`
	LatencySeconds float64  `json:"latency_seconds"` // their sum
	// EstimatedRequests are the requests whose tokens flock estimated
	// because the answer ended before its usage (cut short, or a
	// provider that sent none): at least the text that passed.
	EstimatedRequests uint64 `json:"estimated_requests,omitempty"`
	// ServerToolUses are the provider-side tools the provider ran for
	// the agent's requests (web_search, web_fetch, code_execution, mcp,
	// file_search, image_generation: spec.ServerTools), each use charged
	// beside the tokens, by tool.
	ServerToolUses map[string]uint64 `json:"server_tool_uses,omitempty"`
	// Cost is what the requests cost at their models' prices (a request
	// of a model without one costs nothing here), and DayCost and
	// MonthCost its part in the windows below.
	Cost      PicoUSD `json:"cost_usd,omitempty"`
	DayCost   PicoUSD `json:"day_cost_usd,omitempty"`
	MonthCost PicoUSD `json:"month_cost_usd,omitempty"`
	// Day (2006-01-02) and Month (2006-01), UTC, are the windows the
	// tokens_per_day and tokens_per_month limits count in.
	Day           string `json:"day"`
	DayRequests   uint64 `json:"day_requests"`
	DayTokens     uint64 `json:"day_tokens"`
	Month         string `json:"month"`
	MonthRequests uint64 `json:"month_requests"`
	MonthTokens   uint64 `json:"month_tokens"`
}

// Tokens are a model's tokens, by kind: the one shape of a usage, for a
// request (the gateway's meter), an agent's counts (ModelUsage), status
// and /metrics. Input does not include what was read from the cache.
type Tokens struct {
	InputTokens      uint64 `json:"input_tokens"`
	OutputTokens     uint64 `json:"output_tokens"`
	CacheReadTokens  uint64 `json:"cache_read_tokens"`
	CacheWriteTokens uint64 `json:"cache_write_tokens"`
	// CacheWriteLongTokens are the part of CacheWriteTokens written to
	// a cache that lives longer, at its own price (Anthropic's 1-hour
	// cache).
	CacheWriteLongTokens uint64 `json:"cache_write_long_tokens,omitempty"`
}

// Total is every token counted: input, output, and cache reads and
// writes (each billed, at its own price).
func (t Tokens) Total() uint64 {
	return t.InputTokens + t.OutputTokens + t.CacheReadTokens + t.CacheWriteTokens
}

// Add adds u's tokens to t's.
func (t *Tokens) Add(u Tokens) {
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.CacheReadTokens += u.CacheReadTokens
	t.CacheWriteTokens += u.CacheWriteTokens
	t.CacheWriteLongTokens += u.CacheWriteLongTokens
}

// TokenKinds are the kinds of Tokens by name, in order, as /metrics
// labels them.
var TokenKinds = [...]string{"input", "output", "cache_read", "cache_write"}

// ByKind is t's counts in TokenKinds' order.
func (t Tokens) ByKind() [len(TokenKinds)]uint64 {
	return [...]uint64{t.InputTokens, t.OutputTokens, t.CacheReadTokens, t.CacheWriteTokens}
}

// Today is the day's figures if the day is now's (UTC), else zero: counts
// last reported yesterday are not today's.
func (u ModelUsage) Today(now time.Time) (requests, tokens uint64) {
	if u.Day != now.UTC().Format(DayLayout) {
		return 0, 0
	}
	return u.DayRequests, u.DayTokens
}

// ThisMonth is the month's figures if the month is now's (UTC), else zero.
func (u ModelUsage) ThisMonth(now time.Time) (requests, tokens uint64) {
	if u.Month != now.UTC().Format(MonthLayout) {
		return 0, 0
	}
	return u.MonthRequests, u.MonthTokens
}

// Spend is tokens and money together: what a window spent, or what a
// request may.
type Spend struct {
	Tokens uint64  `json:"tokens"`
	Cost   PicoUSD `json:"cost_usd"`
}

// Windows are what u spent today and this month as of now (UTC); a window
// that is not now's spent nothing.
func (u ModelUsage) Windows(now time.Time) (day, month Spend) {
	if u.Day == now.UTC().Format(DayLayout) {
		day = Spend{u.DayTokens, u.DayCost}
	}
	if u.Month == now.UTC().Format(MonthLayout) {
		month = Spend{u.MonthTokens, u.MonthCost}
	}
	return day, month
}

// Count adds a request at at of tokens and cost to u's totals and
// windows. The windows move forward only: a request of an earlier day (a
// clock stepped back) counts in the totals alone.
func (u *ModelUsage) Count(at time.Time, tokens uint64, cost PicoUSD) {
	u.Requests++
	u.Cost += cost
	at = at.UTC()
	if day := at.Format(DayLayout); day > u.Day {
		u.Day, u.DayRequests, u.DayTokens, u.DayCost = day, 0, 0, 0
	}
	if day := at.Format(DayLayout); day == u.Day {
		u.DayRequests++
		u.DayTokens += tokens
		u.DayCost += cost
	}
	if month := at.Format(MonthLayout); month > u.Month {
		u.Month, u.MonthRequests, u.MonthTokens, u.MonthCost = month, 0, 0, 0
	}
	if month := at.Format(MonthLayout); month == u.Month {
		u.MonthRequests++
		u.MonthTokens += tokens
		u.MonthCost += cost
	}
}

// The windows' layouts.
const (
	DayLayout   = "2006-01-02"
	MonthLayout = "2006-01"
)

// ModelLimits are a grant's limits as the proxy enforces them (0: none).
type ModelLimits struct {
	RequestsPerMinute int     `json:"requests_per_minute,omitempty"`
	TokensPerDay      uint64  `json:"tokens_per_day,omitempty"`
	TokensPerMonth    uint64  `json:"tokens_per_month,omitempty"`
	USDPerDay         PicoUSD `json:"usd_per_day,omitempty"`
	USDPerMonth       PicoUSD `json:"usd_per_month,omitempty"`
	Concurrent        int     `json:"concurrent,omitempty"`
}

// BudgetUse is what a budget's agents spent together today and this
// month (UTC) as flock-proxy counted it, and its limits (0: none).
type BudgetUse struct {
	Day   Spend `json:"day"`
	Month Spend `json:"month"`
	// The limits, as the spec's budget gives them.
	TokensPerDay   uint64  `json:"tokens_per_day,omitempty"`
	TokensPerMonth uint64  `json:"tokens_per_month,omitempty"`
	USDPerDay      PicoUSD `json:"usd_per_day,omitempty"`
	USDPerMonth    PicoUSD `json:"usd_per_month,omitempty"`
}

// ModelReport is one agent's counts for every provider it used or is
// granted, with the limits in force, and for every secret that carried
// or was refused a request (secrets.go).
type ModelReport struct {
	Agent int                    `json:"agent"`
	At    time.Time              `json:"at"`
	Usage map[string]ModelUsage  `json:"usage"`            // by provider
	Limit map[string]ModelLimits `json:"limits,omitempty"` // by provider granted now
	// Budgets are the budgets the agent is in, by name, as of At: the
	// newest report of any of its agents is the budget's.
	Budgets map[string]BudgetUse `json:"budgets,omitempty"`
	// Secrets are the proxy's counts of the agent's secrets, by name,
	// since it started.
	Secrets map[string]SecretUse `json:"secrets,omitempty"`
}

// EncodeModelReport is the body of a ModelReport.
func EncodeModelReport(r ModelReport) ([]byte, error) { return json.Marshal(r) }

// ParseModelReport reads what EncodeModelReport wrote.
func ParseModelReport(b []byte) (ModelReport, error) {
	var r ModelReport
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("model report: %w", err)
	}
	if r.Agent <= 0 {
		return r, fmt.Errorf("model report: agent %d", r.Agent)
	}
	for p, u := range r.Usage {
		if len(u.LatencyBuckets) != len(LatencyBounds)+1 {
			return r, fmt.Errorf("model report: agent %d provider %s: %d latency buckets, want %d", r.Agent, p, len(u.LatencyBuckets), len(LatencyBounds)+1)
		}
	}
	if err := checkSecrets(r.Secrets); err != nil {
		return r, fmt.Errorf("model report: agent %d: %w", r.Agent, err)
	}
	return r, nil
}
