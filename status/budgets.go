package status

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Usage is what flockctl usage shows; its JSON keys are a contract.
type Usage struct {
	// Models are a row per agent and provider.
	Models []ModelUse `json:"models"`
	// Budgets are the spec's budgets (with usage ID, the agent's).
	Budgets []BudgetSpend `json:"budgets"`
	// Flock is the sum of every agent's rows; absent with usage ID.
	Flock *Total `json:"flock,omitempty"`
}

// BudgetSpend is a budget of the spec and what its agents spent together
// today and this month (UTC), as the newest report of any of them says;
// its JSON keys are a contract.
type BudgetSpend struct {
	Name string `json:"name"`
	// Its agents as the spec names them: all, or by id and by role.
	All    bool     `json:"all,omitempty"`
	Agents []int    `json:"agents,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	// Reported: a report of one of its agents has it (false: none yet, or
	// the bus did not answer; the figures are then zero).
	Reported bool `json:"reported"`
	// Day and Month (tokens, cost_usd), and the spec's limits.
	wire.BudgetUse
}

// Total is the sum of agents' rows: the flock's spend; its JSON keys are
// a contract.
type Total struct {
	Today         wire.Spend   `json:"today"`
	TodayRequests uint64       `json:"today_requests"`
	Month         wire.Spend   `json:"month"`
	MonthRequests uint64       `json:"month_requests"`
	Requests      uint64       `json:"requests"`
	Tokens        uint64       `json:"tokens"`
	Cost          wire.PicoUSD `json:"cost_usd"`
}

// UsageOf is usage's figures for f's agents (only: that one; 0: all), from
// the bus's status st (nil: it did not answer) as of now.
func UsageOf(f *spec.Flock, st *wire.BusStatus, only int, now time.Time) Usage {
	u := Usage{Models: []ModelUse{}}
	budgets := f.Budgets
	for _, a := range f.Agents {
		if only != 0 && a.ID != only {
			continue
		}
		if only != 0 {
			budgets = f.BudgetsOf(a)
		}
		for _, m := range ModelsOf(a, modelReport(st, a.ID), now) {
			m.Agent = a.ID
			u.Models = append(u.Models, m)
		}
	}
	u.Budgets = BudgetsOf(budgets, reports(st), now)
	if only == 0 {
		t := TotalOf(u.Models)
		u.Flock = &t
	}
	return u
}

// BudgetsOf are budgets bs with what reports (every agent's) say they
// spent as of now; the limits are the spec's.
func BudgetsOf(bs []spec.Budget, reports []wire.ModelReport, now time.Time) []BudgetSpend {
	said := wire.BudgetsNow(reports, now)
	out := []BudgetSpend{}
	for _, b := range bs {
		s := BudgetSpend{Name: b.Name, All: b.All, Agents: b.Agents}
		for _, r := range b.Roles {
			s.Roles = append(s.Roles, string(r))
		}
		var use wire.BudgetUse
		use, s.Reported = said[b.Name]
		s.BudgetUse = wire.BudgetUse{Day: use.Day, Month: use.Month, TokensPerDay: b.Limits.TokensPerDay,
			TokensPerMonth: b.Limits.TokensPerMonth, USDPerDay: b.Limits.USDPerDay, USDPerMonth: b.Limits.USDPerMonth}
		out = append(out, s)
	}
	return out
}

// TotalOf is the sum of rows.
func TotalOf(rows []ModelUse) Total {
	var t Total
	for _, m := range rows {
		t.Today.Tokens += m.TodayTokens
		t.Today.Cost += m.TodayCost
		t.TodayRequests += m.TodayRequests
		t.Month.Tokens += m.MonthTokens
		t.Month.Cost += m.MonthCost
		t.MonthRequests += m.MonthRequests
		t.Requests += m.Requests
		t.Tokens += m.Total()
		t.Cost += m.Cost
	}
	return t
}

// modelReport is agent id's last report in st (nil: none).
func modelReport(st *wire.BusStatus, id int) *wire.ModelReport {
	if st == nil {
		return nil
	}
	return st.Agents[id].Models
}

// reports are every agent's last report in st.
func reports(st *wire.BusStatus) []wire.ModelReport {
	var out []wire.ModelReport
	if st != nil {
		for _, a := range st.Agents {
			if a.Models != nil {
				out = append(out, *a.Models)
			}
		}
	}
	return out
}

// writeBudgets is usage's second table: each budget's spend against its
// limits, then the flock's sum.
func writeBudgets(w io.Writer, u Usage) {
	if len(u.Budgets) == 0 && u.Flock == nil {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SPEND OF\tTODAY\tTHIS MONTH\tLIMITS")
	for _, b := range u.Budgets {
		today, month := "-", "-"
		if b.Reported {
			today = spent(b.Day.Tokens, b.Day.Cost) + of(shares(b.Day.Tokens, b.Day.Cost, b.TokensPerDay, b.USDPerDay, ""))
			month = spent(b.Month.Tokens, b.Month.Cost) + of(shares(b.Month.Tokens, b.Month.Cost, b.TokensPerMonth, b.USDPerMonth, ""))
		}
		limits := limitsText(wire.ModelLimits{TokensPerDay: b.TokensPerDay, TokensPerMonth: b.TokensPerMonth, USDPerDay: b.USDPerDay, USDPerMonth: b.USDPerMonth})
		fmt.Fprintf(tw, "budget %s (%s)\t%s\t%s\t%s\n", b.Name, members(b), today, month, limits)
	}
	if t := u.Flock; t != nil {
		fmt.Fprintf(tw, "the flock (every agent)\t%s, %d req\t%s, %d req\t-\n",
			spent(t.Today.Tokens, t.Today.Cost), t.TodayRequests, spent(t.Month.Tokens, t.Month.Cost), t.MonthRequests)
	}
	tw.Flush()
}

// members are a budget's agents as the spec names them: "all", "role
// worker, agents 3, 5".
func members(b BudgetSpend) string {
	if b.All {
		return "all"
	}
	var parts []string
	if len(b.Roles) > 0 {
		parts = append(parts, "role "+strings.Join(b.Roles, ", "))
	}
	if len(b.Agents) > 0 {
		ids := make([]string, len(b.Agents))
		for i, id := range b.Agents {
			ids[i] = strconv.Itoa(id)
		}
		parts = append(parts, "agents "+strings.Join(ids, ", "))
	}
	return strings.Join(parts, ", ")
}

// spent is a window's tokens and money: "1.20M tokens, $4.10".
func spent(tokens uint64, cost wire.PicoUSD) string {
	if cost == 0 { // nothing priced: no dollars to show
		return count(tokens) + " tokens"
	}
	return fmt.Sprintf("%s tokens, %s", count(tokens), cost)
}

// of is shares in parentheses after a cell, "" for none.
func of(shares string) string {
	if shares == "" {
		return ""
	}
	return " (" + shares + ")"
}

// shares are what was spent of each limit set (0: none): "60% of 2.00M,
// 82% of $5.00"; per ("/day") names the window after each limit, the
// tokens then called so.
func shares(tokens uint64, cost wire.PicoUSD, tokenLimit uint64, usdLimit wire.PicoUSD, per string) string {
	var parts []string
	if tokenLimit > 0 {
		unit := ""
		if per != "" {
			unit = " tokens"
		}
		parts = append(parts, fmt.Sprintf("%d%% of %s%s%s", percent(tokens, tokenLimit), count(tokenLimit), unit, per))
	}
	if usdLimit > 0 {
		parts = append(parts, fmt.Sprintf("%d%% of %s%s", percent(uint64(cost), uint64(usdLimit)), usdLimit, per))
	}
	return strings.Join(parts, ", ")
}

// percent is used of limit (> 0) in whole percent, rounded down, exact for
// any amount (100 × a PicoUSD passes 64 bits).
func percent(used, limit uint64) uint64 {
	hi, lo := bits.Mul64(used, 100)
	if hi >= limit {
		return math.MaxUint64 // 2^64 times over: no finer figure matters
	}
	q, _ := bits.Div64(hi, lo, limit)
	return q
}

// printSpend is status's line of the flock's spend, below the table:
// "spend: $12.30 today, $210.40 this month (budget flock: 52% of
// $400.00/month)", each budget with a limit at its share; nothing when no
// agent's models were reported.
func printSpend(w io.Writer, rows []Agent, budgets []BudgetSpend) {
	var all []ModelUse
	reported := false
	for _, r := range rows {
		for _, m := range r.Models {
			all = append(all, m)
			reported = reported || m.Reported
		}
	}
	if !reported {
		return
	}
	t := TotalOf(all)
	line := fmt.Sprintf("spend: %s today, %s this month", t.Today.Cost, t.Month.Cost)
	var parts []string
	for _, b := range budgets {
		s := strings.Join(nonEmpty(shares(b.Day.Tokens, b.Day.Cost, b.TokensPerDay, b.USDPerDay, "/day"),
			shares(b.Month.Tokens, b.Month.Cost, b.TokensPerMonth, b.USDPerMonth, "/month")), ", ")
		if s != "" {
			parts = append(parts, "budget "+b.Name+": "+s)
		}
	}
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, "; ") + ")"
	}
	fmt.Fprintln(w, line)
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
