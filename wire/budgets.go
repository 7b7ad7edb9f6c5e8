package wire

import "time"

// BudgetsNow are the budgets of reports by name, each as the newest
// report (by At) that has it says, as of now: every report of a budget's
// agents carries the whole budget's figures, and the newest is current. A
// window that is not now's (the report is of yesterday) spent nothing yet.
func BudgetsNow(reports []ModelReport, now time.Time) map[string]BudgetUse {
	out, at := map[string]BudgetUse{}, map[string]time.Time{}
	for _, r := range reports {
		for name, b := range r.Budgets {
			if seen, ok := at[name]; ok && !r.At.After(seen) {
				continue
			}
			at[name] = r.At
			if r.At.UTC().Format(DayLayout) != now.UTC().Format(DayLayout) {
				b.Day = Spend{}
			}
			if r.At.UTC().Format(MonthLayout) != now.UTC().Format(MonthLayout) {
				b.Month = Spend{}
			}
			out[name] = b
		}
	}
	return out
}
