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
	"maps"
	"slices"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Policy is who may call which provider, with which limits. It is
// replaced whole on reload; a request decides once, when it arrives.
type Policy struct {
	Providers map[string]spec.Provider // by name
	Agents    map[uint32]Agent         // by uid
	// Budgets are the spec's budgets, each with the agents of Agents it
	// holds (by id), in the spec's order.
	Budgets []spec.Budget
}

// Agent is one agent's grants.
type Agent struct {
	ID     int
	Grants map[string]spec.Grant // by provider
	// Worker: it takes tasks, and its requests are charged to the task
	// it holds (Leases), within TaskBudget.
	Worker     bool
	TaskBudget wire.TaskBudget
}

// ForFlock is the gateway's policy for agents (this host's) of f: every
// agent with a grant, and the providers they are granted. Pure.
func ForFlock(f *spec.Flock, agents []spec.Agent) Policy {
	p := Policy{Providers: map[string]spec.Provider{}, Agents: map[uint32]Agent{}}
	for _, a := range agents {
		if !a.HasModels() {
			continue
		}
		for _, g := range a.Models {
			if pr, ok := f.Provider(g.Provider); ok {
				p.Providers[pr.Name] = pr
			}
		}
		ag := AgentOf(a.ID, a.Models)
		ag.Worker, ag.TaskBudget = a.Role == spec.RoleWorker, a.TaskBudget
		p.Agents[f.UID(a.ID)] = ag
	}
	for _, b := range f.Budgets {
		held := spec.Budget{Name: b.Name, Limits: b.Limits}
		for _, a := range agents {
			if a.HasModels() && b.Has(a) {
				held.Agents = append(held.Agents, a.ID)
			}
		}
		if len(held.Agents) > 0 {
			p.Budgets = append(p.Budgets, held)
		}
	}
	return p
}

// groups are p's budgets' agents, by budget: what the counts keep a
// window of (Store.SetGroups).
func (p Policy) groups() map[string][]int {
	out := map[string][]int{}
	for _, b := range p.Budgets {
		out[b.Name] = b.Agents
	}
	return out
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
	for _, pr := range p.Listed() {
		if pr.KeyFile != "" {
			out = append(out, [2]string{KeyCredential(pr.Name), pr.KeyFile})
		}
		if pr.CAFile != "" {
			out = append(out, [2]string{CACredential(pr.Name), pr.CAFile})
		}
	}
	return out
}

// Listed are p's providers in name order, as the proxy's config file
// lists them (spec.EncodeProviders).
func (p Policy) Listed() []spec.Provider {
	var out []spec.Provider
	for _, name := range slices.Sorted(maps.Keys(p.Providers)) {
		out = append(out, p.Providers[name])
	}
	return out
}

// Listed are a's grants in provider order, as the proxy's config file
// lists them (spec.EncodeGrants).
func (a Agent) Listed() []spec.Grant {
	var out []spec.Grant
	for _, name := range slices.Sorted(maps.Keys(a.Grants)) {
		out = append(out, a.Grants[name])
	}
	return out
}

// AgentOf is agent id's grants gs, by provider.
func AgentOf(id int, gs []spec.Grant) Agent {
	a := Agent{ID: id, Grants: map[string]spec.Grant{}}
	for _, g := range gs {
		a.Grants[g.Provider] = g
	}
	return a
}
