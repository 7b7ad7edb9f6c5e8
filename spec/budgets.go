package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/wire"
)

// Budgets: limits on what a group of agents spends of every model API
// together, in tokens or in money, per UTC day and month. A request of an
// agent must fit its grant's limits and every budget the agent is in, each
// judged by the same reservation before the request is sent.

// Budget is one group's limits; a zero limit is none.
type Budget struct {
	Name string // [a-z0-9-]: the events', the metrics' and usage's word for it
	// All: every agent of the flock; else the agents listed and those of
	// the roles listed.
	All    bool
	Agents []int
	Roles  []Role
	Limits MoneyLimits
}

// MoneyLimits are the limits of a budget, and a grant's beside its own.
type MoneyLimits struct {
	TokensPerDay, TokensPerMonth uint64
	USDPerDay, USDPerMonth       wire.PicoUSD
}

// Any says whether l limits anything.
func (l MoneyLimits) Any() bool {
	return l.TokensPerDay > 0 || l.TokensPerMonth > 0 || l.USDPerDay > 0 || l.USDPerMonth > 0
}

// Money says whether l limits money.
func (l MoneyLimits) Money() bool { return l.USDPerDay > 0 || l.USDPerMonth > 0 }

// Has says whether agent a is in b.
func (b Budget) Has(a Agent) bool {
	return b.All || slices.Contains(b.Agents, a.ID) || slices.Contains(b.Roles, a.Role)
}

// BudgetsOf are the budgets agent a is in, in the spec's order.
func (f *Flock) BudgetsOf(a Agent) []Budget {
	var out []Budget
	for _, b := range f.Budgets {
		if b.Has(a) {
			out = append(out, b)
		}
	}
	return out
}

const budgetsExample = `budgets: [{name: research, roles: [worker], usd_per_day: 20}]`

var budgetNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// budgets reads budgets:, once the agents are known: a list of {name,
// agents (ids, or all), roles, and the limits}, names unique.
func (w *walker) budgets(n *yaml.Node, path string, agents []Agent) []Budget {
	if n.Kind != yaml.SequenceNode {
		w.fail(path, "is %s; list the budgets, e.g. %s", kindName(n), budgetsExample)
		return nil
	}
	var out []Budget
	seen := map[string]int{}
	for i, item := range n.Content {
		p := index(path, i)
		fs, ok := w.fields(item, p, budgetKeys...)
		if !ok {
			continue
		}
		var b Budget
		if nn, given := fs["name"]; !given {
			w.fail(join(p, "name"), "missing; name every budget, e.g. name: research")
		} else if s, ok := w.str(nn, join(p, "name"), "research"); ok {
			switch j, dup := seen[s]; {
			case !budgetNameRe.MatchString(s):
				w.fail(join(p, "name"), "%q is not a budget name; use lower-case letters, digits and -, at most 32, e.g. research", s)
			case dup:
				w.fail(join(p, "name"), "%q is already the name of budgets[%d]; give every budget its own name", s, j)
			default:
				seen[s], b.Name = i, s
			}
		}
		if an, given := fs["agents"]; given {
			b.All, b.Agents = w.budgetAgents(an, join(p, "agents"), agents)
		}
		if rn, given := fs["roles"]; given {
			items, _ := w.strList(rn, join(p, "roles"), "[worker]")
			for j, s := range items {
				r := Role(s)
				if !slices.Contains([]Role{RoleOrchestrator, RoleWorker, RoleMonitor}, r) {
					w.fail(index(join(p, "roles"), j), "%q is not a role; choose orchestrator, worker or monitor", s)
					continue
				}
				b.Roles = append(b.Roles, r)
			}
		}
		if !b.All && len(b.Agents) == 0 && len(b.Roles) == 0 {
			w.fail(p, "names no agent; give agents: [1, 2], roles: [worker], or agents: all for the whole flock")
		}
		b.Limits = w.moneyLimits(fs, p)
		if !b.Limits.Any() {
			w.fail(p, "limits nothing; give tokens_per_day, tokens_per_month, usd_per_day or usd_per_month")
		}
		out = append(out, b)
	}
	return out
}

// budgetAgents reads a budget's agents: all, or a list of the spec's
// agent ids.
func (w *walker) budgetAgents(n *yaml.Node, path string, agents []Agent) (bool, []int) {
	if n.Kind == yaml.ScalarNode && n.Value == "all" {
		return true, nil
	}
	if n.Kind != yaml.SequenceNode {
		w.fail(path, "is %s; write all, or a list of agent ids, e.g. [1, 2]", kindName(n))
		return false, nil
	}
	var ids []int
	for i, item := range n.Content {
		v, ok := w.integer(item, index(path, i), "an agent id", 1, MaxID)
		if !ok {
			continue
		}
		id := int(v)
		switch {
		case !slices.ContainsFunc(agents, func(a Agent) bool { return a.ID == id }):
			w.fail(index(path, i), "%d is not an agent of this flock; list the ids of agents:", id)
		case slices.Contains(ids, id):
			w.fail(index(path, i), "%d is listed twice; keep one", id)
		default:
			ids = append(ids, id)
		}
	}
	return false, ids
}

// moneyLimits reads the token and money limits of a budget or a grant
// from its fields fs at path.
func (w *walker) moneyLimits(fs map[string]*yaml.Node, path string) MoneyLimits {
	var l MoneyLimits
	if x, ok := fs["tokens_per_day"]; ok {
		l.TokensPerDay = w.tokens(x, join(path, "tokens_per_day"))
	}
	if x, ok := fs["tokens_per_month"]; ok {
		l.TokensPerMonth = w.tokens(x, join(path, "tokens_per_month"))
	}
	if l.TokensPerDay > 0 && l.TokensPerMonth > 0 && l.TokensPerDay > l.TokensPerMonth {
		w.fail(join(path, "tokens_per_day"), "%d is more than tokens_per_month %d; a day cannot spend more than its month", l.TokensPerDay, l.TokensPerMonth)
	}
	if x, ok := fs["usd_per_day"]; ok {
		l.USDPerDay = w.usd(x, join(path, "usd_per_day"))
	}
	if x, ok := fs["usd_per_month"]; ok {
		l.USDPerMonth = w.usd(x, join(path, "usd_per_month"))
	}
	if l.USDPerDay > 0 && l.USDPerMonth > 0 && l.USDPerDay > l.USDPerMonth {
		w.fail(join(path, "usd_per_day"), "%s is more than usd_per_month %s; a day cannot spend more than its month", l.USDPerDay, l.USDPerMonth)
	}
	return l
}

// usd reads an amount of dollars, more than zero: 20, 0.5.
func (w *walker) usd(n *yaml.Node, path string) wire.PicoUSD {
	if n.Kind != yaml.ScalarNode || isNull(n) || (n.Tag != "!!int" && n.Tag != "!!float") {
		w.fail(path, "%s is not an amount of dollars; write a number, e.g. 20 or 2.50", kindName(n))
		return 0
	}
	v, err := wire.ParseUSD(n.Value)
	if err == nil && v == 0 {
		err = fmt.Errorf("%s is zero; leave the limit out for none", strconv.Quote(n.Value))
	}
	if err != nil {
		w.fail(path, "%v", err)
		return 0
	}
	return v
}
