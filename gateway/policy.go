// Package gateway is flock's model gateway, served by flock-proxy beside
// its CONNECT tunnels: an agent granted a model API (spec: providers and
// an agent's models) reaches it at http://<proxy>/<provider>/..., with no
// key of its own. The gateway knows the agent by the uid the kernel says
// owns its socket, checks its grant and limits, drops whatever key the
// client sent, adds the provider's (which only flock-proxy.service is
// handed, as a systemd credential), forwards over verified TLS, passes
// streams on event by event, and meters the usage each answer reports
// into counts kept on disk.
package gateway

import (
	"fmt"
	"maps"
	"slices"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
)

// Policy is who may call which provider, with which limits. It is
// replaced whole on reload; a request decides once, when it arrives.
type Policy struct {
	Providers map[string]spec.Provider // by name
	Agents    map[uint32]Agent         // by uid
}

// Agent is one agent's grants.
type Agent struct {
	ID     int
	Grants map[string]spec.Grant // by provider
}

// ForFlock is the gateway's policy for agents (this host's) of f: every
// agent with a grant, and the providers they are granted. Pure.
func ForFlock(f *spec.Flock, agents []spec.Agent) Policy {
	p := Policy{Providers: map[string]spec.Provider{}, Agents: map[uint32]Agent{}}
	for _, a := range agents {
		if !a.HasModels() {
			continue
		}
		ag := Agent{ID: a.ID, Grants: map[string]spec.Grant{}}
		for _, g := range a.Models {
			ag.Grants[g.Provider] = g
			if pr, ok := f.Provider(g.Provider); ok {
				p.Providers[pr.Name] = pr
			}
		}
		p.Agents[f.UID(a.ID)] = ag
	}
	return p
}

// Empty says whether no agent has a grant.
func (p Policy) Empty() bool { return len(p.Agents) == 0 }

// Credential names: how flock-proxy.service's unit names each provider's
// key and CA file (LoadCredential=NAME:PATH), and where the proxy finds
// them ($CREDENTIALS_DIRECTORY/NAME).
func KeyCredential(provider string) string { return "model-key-" + provider }

// CACredential is the credential name of provider's CA file.
func CACredential(provider string) string { return "model-ca-" + provider }

// Credentials are the files flock-proxy.service is handed for p, name ->
// path, in name order: what its unit lists.
func (p Policy) Credentials() [][2]string {
	var out [][2]string
	for _, name := range slices.Sorted(maps.Keys(p.Providers)) {
		pr := p.Providers[name]
		if pr.KeyFile != "" {
			out = append(out, [2]string{KeyCredential(name), pr.KeyFile})
		}
		if pr.CAFile != "" {
			out = append(out, [2]string{CACredential(name), pr.CAFile})
		}
	}
	return out
}

// ProviderEntry is a provider in the proxy's config file.
type ProviderEntry struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	URL     string `json:"url"`
	KeyFile string `json:"key_file,omitempty"`
	CAFile  string `json:"ca_file,omitempty"`
}

// GrantEntry is one grant of an agent in the proxy's config file.
type GrantEntry struct {
	Provider          string `json:"provider"`
	RequestsPerMinute int    `json:"requests_per_minute,omitempty"`
	TokensPerDay      uint64 `json:"tokens_per_day,omitempty"`
	TokensPerMonth    uint64 `json:"tokens_per_month,omitempty"`
	Concurrent        int    `json:"concurrent,omitempty"`
	// ServerTools and Betas are what the grant's requests may ask of
	// the provider beyond the model (spec.Grant's): none unless listed.
	ServerTools []string `json:"server_tools,omitempty"`
	Betas       []string `json:"betas,omitempty"`
}

// Entries are p's providers in name order, and each uid's grants in
// provider order, as the config file has them.
func (p Policy) Entries() ([]ProviderEntry, map[uint32][]GrantEntry) {
	var prs []ProviderEntry
	for _, name := range slices.Sorted(maps.Keys(p.Providers)) {
		pr := p.Providers[name]
		prs = append(prs, ProviderEntry{Name: pr.Name, Kind: string(pr.Kind), URL: pr.URL, KeyFile: pr.KeyFile, CAFile: pr.CAFile})
	}
	grants := map[uint32][]GrantEntry{}
	for uid, a := range p.Agents {
		for _, name := range slices.Sorted(maps.Keys(a.Grants)) {
			g := a.Grants[name]
			e := GrantEntry{Provider: name, RequestsPerMinute: g.RequestsPerMinute,
				TokensPerDay: g.TokensPerDay, TokensPerMonth: g.TokensPerMonth, Concurrent: g.Concurrent, Betas: slices.Clone(g.Betas)}
			for _, t := range g.ServerTools {
				e.ServerTools = append(e.ServerTools, string(t))
			}
			grants[uid] = append(grants[uid], e)
		}
	}
	return prs, grants
}

// FromEntries reads what Entries wrote, checking each provider as the
// spec does; ids maps each uid to its agent id.
func FromEntries(prs []ProviderEntry, grants map[uint32][]GrantEntry, ids map[uint32]int) (Policy, error) {
	p := Policy{Providers: map[string]spec.Provider{}, Agents: map[uint32]Agent{}}
	for _, e := range prs {
		if _, dup := p.Providers[e.Name]; dup || e.Name == "" {
			return Policy{}, fmt.Errorf("provider %q twice or unnamed", e.Name)
		}
		kind := spec.ProviderKind(e.Kind)
		if _, ok := modelapi.Lookup(e.Kind); !ok {
			return Policy{}, fmt.Errorf("provider %s: kind %q", e.Name, e.Kind)
		}
		u, problem := spec.ProviderURLProblem(e.URL)
		if problem != "" {
			return Policy{}, fmt.Errorf("provider %s: %s", e.Name, problem)
		}
		p.Providers[e.Name] = spec.Provider{Name: e.Name, Kind: kind, URL: u, KeyFile: e.KeyFile, CAFile: e.CAFile}
	}
	for uid, gs := range grants {
		a := Agent{ID: ids[uid], Grants: map[string]spec.Grant{}}
		for _, g := range gs {
			if _, ok := p.Providers[g.Provider]; !ok {
				return Policy{}, fmt.Errorf("agent %d: grant of %q, which is not a provider", a.ID, g.Provider)
			}
			gr := spec.Grant{Provider: g.Provider, RequestsPerMinute: g.RequestsPerMinute,
				TokensPerDay: g.TokensPerDay, TokensPerMonth: g.TokensPerMonth, Concurrent: g.Concurrent, Betas: slices.Clone(g.Betas)}
			for _, t := range g.ServerTools {
				if !slices.Contains(modelapi.ServerTools[:], spec.ServerTool(t)) {
					return Policy{}, fmt.Errorf("agent %d: grant of %s: server tool %q is not one this proxy knows (%v)", a.ID, g.Provider, t, modelapi.ServerTools)
				}
				gr.ServerTools = append(gr.ServerTools, spec.ServerTool(t))
			}
			a.Grants[g.Provider] = gr
		}
		p.Agents[uid] = a
	}
	return p, nil
}
