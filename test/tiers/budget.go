package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// budgetHeading is the section of docs/testing.md whose first table gives
// each tier's budget: a column "tier" and a column "budget (minutes)";
// the row "all" is the whole run's.
const budgetHeading = "## Budgets"

// allTiers is the row of the whole run.
const allTiers = "all"

// parseBudgets reads the budget table from a page.
func parseBudgets(page string) (map[string]time.Duration, error) {
	lines := strings.Split(page, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == budgetHeading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no section %q", budgetHeading)
	}
	var rows [][]string
	for _, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if len(rows) > 0 {
				break // the table's end
			}
			continue
		}
		rows = append(rows, cells(l))
	}
	if len(rows) < 3 {
		return nil, fmt.Errorf("section %q has no table with a header and rows", budgetHeading)
	}
	tierCol, budgetCol := -1, -1
	for i, h := range rows[0] {
		switch {
		case h == "tier":
			tierCol = i
		case strings.HasPrefix(h, "budget"):
			budgetCol = i
		}
	}
	if tierCol < 0 || budgetCol < 0 {
		return nil, fmt.Errorf("section %q: the table's header %q has no column \"tier\" and \"budget (minutes)\"", budgetHeading, rows[0])
	}
	budgets := map[string]time.Duration{}
	for _, r := range rows[2:] { // after the header and its |---| line
		if len(r) <= max(tierCol, budgetCol) {
			return nil, fmt.Errorf("section %q: row %q has too few cells", budgetHeading, r)
		}
		tier := strings.Trim(r[tierCol], "`*")
		m, err := strconv.ParseFloat(r[budgetCol], 64)
		if err != nil || m <= 0 {
			return nil, fmt.Errorf("section %q: tier %s: budget %q is not a number of minutes", budgetHeading, tier, r[budgetCol])
		}
		if _, dup := budgets[tier]; dup {
			return nil, fmt.Errorf("section %q: tier %s has two rows", budgetHeading, tier)
		}
		budgets[tier] = time.Duration(m * float64(time.Minute))
	}
	if budgets[allTiers] == 0 {
		return nil, fmt.Errorf("section %q: no row %q (the whole run's budget)", budgetHeading, allTiers)
	}
	return budgets, nil
}

// cells splits a Markdown table row into its trimmed cells.
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	for _, c := range strings.Split(row, "|") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}
