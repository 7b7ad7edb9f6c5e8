package explain

import (
	"fmt"
	"strings"

	"github.com/flockrun/flock/spec"
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
	RequestsPerMinute int    `json:"requests_per_minute,omitempty"`
	TokensPerDay      uint64 `json:"tokens_per_day,omitempty"`
	TokensPerMonth    uint64 `json:"tokens_per_month,omitempty"`
	Concurrent        int    `json:"concurrent,omitempty"`
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
			RequestsPerMinute: g.RequestsPerMinute, TokensPerDay: g.TokensPerDay, TokensPerMonth: g.TokensPerMonth, Concurrent: g.Concurrent,
			Betas: g.Betas}
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
	var parts []string
	if m.RequestsPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("requests_per_minute %d", m.RequestsPerMinute))
	}
	if m.TokensPerDay > 0 {
		parts = append(parts, fmt.Sprintf("tokens_per_day %d", m.TokensPerDay))
	}
	if m.TokensPerMonth > 0 {
		parts = append(parts, fmt.Sprintf("tokens_per_month %d", m.TokensPerMonth))
	}
	if m.Concurrent > 0 {
		parts = append(parts, fmt.Sprintf("concurrent %d", m.Concurrent))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
