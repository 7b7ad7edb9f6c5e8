package wire

// Tier: unit.

import (
	"testing"
	"time"
)

// A budget is what the newest report that has it says, whatever the order
// the reports come in; a report of yesterday spent nothing today, but its
// month is still this month's.
func TestBudgetsNow(t *testing.T) {
	now := time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC)
	use := func(day, month PicoUSD) BudgetUse {
		return BudgetUse{Day: Spend{Tokens: 10, Cost: day}, Month: Spend{Tokens: 20, Cost: month}, USDPerDay: 5 * USD}
	}
	older := ModelReport{Agent: 1, At: now.Add(-time.Minute), Budgets: map[string]BudgetUse{"team": use(1, 2)}}
	newer := ModelReport{Agent: 2, At: now, Budgets: map[string]BudgetUse{"team": use(3, 4), "flock": use(5, 6)}}
	yesterday := ModelReport{Agent: 3, At: now.Add(-24 * time.Hour), Budgets: map[string]BudgetUse{"night": use(7, 8)}}
	for _, order := range [][]ModelReport{{older, newer, yesterday}, {yesterday, newer, older}} {
		got := BudgetsNow(order, now)
		if len(got) != 3 || got["team"] != use(3, 4) || got["flock"] != use(5, 6) {
			t.Errorf("the newest report's figures: %+v", got)
		}
		if n := got["night"]; n.Day != (Spend{}) || n.Month != (Spend{Tokens: 20, Cost: 8}) || n.USDPerDay != 5*USD {
			t.Errorf("yesterday's report: %+v, want nothing today and its month", n)
		}
	}
	if got := BudgetsNow(nil, now); len(got) != 0 {
		t.Errorf("no reports: %+v", got)
	}
}
