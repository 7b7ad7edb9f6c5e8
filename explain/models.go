package explain

import (
	"fmt"
	"strings"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Model is one model API an agent is granted: where its SDK is pointed
// (the gateway in flock-proxy), where the proxy forwards, and the limits
// the proxy enforces. The key is the proxy's alone (KeyFile, root's file,
// handed to flock-proxy.service as a credential).
type Model struct {
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	BaseURL  string `json:"base_url"` // what the agent calls: the gateway
	Upstream string `json:"upstream"` // where the proxy forwards
	KeyFile  string `json:"key_file,omitempty"`
	// Limits are its grant's, as the spec writes them (0: none).
	wire.ModelLimits
	// ServerTools and Betas are the provider-side tools (and the
	// anthropic-beta values that turn them on) its requests may ask for:
	// none unless the grant lists them.
	ServerTools []string `json:"server_tools,omitempty"`
	Betas       []string `json:"betas,omitempty"`
}

// Models are agent a's grants in f, reached at the proxy on listen.
func Models(f *spec.Flock, a spec.Agent, listen string) []Model {
	out := []Model{}
	for _, g := range a.Models {
		p, _ := f.Provider(g.Provider)
		m := Model{Provider: g.Provider, Kind: string(p.Kind), BaseURL: spec.GatewayURL(listen, g.Provider), Upstream: p.URL, KeyFile: p.KeyFile,
			ModelLimits: g.Limits(), Betas: g.Betas}
		for _, t := range g.ServerTools {
			m.ServerTools = append(m.ServerTools, string(t))
		}
		out = append(out, m)
	}
	return out
}

// needs says what an agent reaches through the proxy.
func needs(names, models bool) string {
	switch {
	case names && models:
		return "names and model APIs"
	case models:
		return "model APIs"
	}
	return "names"
}

// ModelLines say what an agent's grants are, for the text forms.
func ModelLines(ms []Model) []string {
	if len(ms) == 0 {
		return nil
	}
	out := []string{"# model APIs (through flock-proxy, which holds the keys; the agent has a placeholder):"}
	for _, m := range ms {
		key := "no key"
		if m.KeyFile != "" {
			key = "key " + m.KeyFile + " (flock-proxy's alone)"
		}
		tools := "none"
		if len(m.ServerTools) > 0 {
			tools = strings.Join(m.ServerTools, ", ")
		}
		if len(m.Betas) > 0 {
			tools += " (betas " + strings.Join(m.Betas, ", ") + ")"
		}
		out = append(out, fmt.Sprintf("#   %s: %s API at %s, %s; the agent calls %s; limits: %s; provider-side tools: %s", m.Provider, m.Kind, m.Upstream, key, m.BaseURL, m.LimitsText(), tools))
	}
	return out
}

// LimitsText is m's limits as the spec writes them, "none" for none.
func (m Model) LimitsText() string {
	return limitsText(uint64(m.RequestsPerMinute), spec.MoneyLimits{TokensPerDay: m.TokensPerDay, TokensPerMonth: m.TokensPerMonth,
		USDPerDay: m.USDPerDay, USDPerMonth: m.USDPerMonth}, uint64(m.Concurrent))
}

// limitsText names the limits set of rpm, l and concurrent, as the spec
// writes them; "none" for none.
func limitsText(rpm uint64, l spec.MoneyLimits, concurrent uint64) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    uint64
		usd  bool
	}{{"requests_per_minute", rpm, false}, {"tokens_per_day", l.TokensPerDay, false}, {"tokens_per_month", l.TokensPerMonth, false},
		{"usd_per_day", uint64(l.USDPerDay), true}, {"usd_per_month", uint64(l.USDPerMonth), true}, {"concurrent", concurrent, false}} {
		switch {
		case f.v == 0:
		case f.usd:
			parts = append(parts, f.name+" "+wire.PicoUSD(f.v).Decimal())
		default:
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Budget is a budget an agent is in, with its limits.
type Budget struct {
	Name   string `json:"name"`
	Limits string `json:"limits"` // as the spec writes them
}

// Budgets are the budgets agent a is in, in f's order.
func Budgets(f *spec.Flock, a spec.Agent) []Budget {
	var out []Budget
	for _, b := range f.BudgetsOf(a) {
		out = append(out, Budget{Name: b.Name, Limits: limitsText(0, b.Limits, 0)})
	}
	return out
}

// TaskBudgetLine is an agent's task_budget for a reader ("" for none).
func TaskBudgetLine(b *wire.TaskBudget) string {
	if b == nil || !b.Any() {
		return ""
	}
	var parts []string
	if b.USD > 0 {
		parts = append(parts, b.USD.String())
	}
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	return "#   each task it takes may spend at most " + strings.Join(parts, " and ") + " (task_budget; a task sent with a smaller budget of its own is held to that)"
}

// BudgetLine says which budgets an agent's model requests must also fit,
// for the text forms ("" for none).
func BudgetLine(bs []Budget) string {
	if len(bs) == 0 {
		return ""
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Name+" ("+b.Limits+")")
	}
	return "#   budgets, shared with their other agents: " + strings.Join(parts, "; ")
}
