package proxy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// ConfigPath is where provision writes the proxy's config, beside the
// bus's (nothing in it is secret: uids and rules).
const ConfigPath = "/etc/flock/proxy.json"

// Config is the proxy's config file: where it listens and every agent
// with names in its egress. provision writes it (Encode) and the proxy
// reads it (Decode) with the same code; only uids and rules, no secrets.
type Config struct {
	Listen string
	Bus    string // the bus's URL, where decisions are published ("": none)
	Policy Policy
	// Gateway is who may call which model API (package gateway): the
	// providers (their key files' paths, never the keys) and each
	// agent's grants.
	Gateway gateway.Policy
	// Secrets are the spec's secrets: (their files' paths, never the
	// values), and Placeholders each agent's grants of them by uid: the
	// secret's name and the placeholder the agent holds, which provision
	// derives and the proxy swaps (package secrets). A placeholder is
	// worth nothing without the proxy's binding of it to the agent's uid.
	Secrets      []spec.Secret
	Placeholders map[uint32]map[string]string
}

// configFile is the file's shape. Providers and each agent's Models are
// the spec's own providers: and models:, written and read by the spec's
// codec (spec.EncodeProviders, DecodeGrants...), so the proxy checks them
// by the spec's rules.
type configFile struct {
	Listen    string          `json:"listen"`
	Bus       string          `json:"bus,omitempty"`
	Providers json.RawMessage `json:"providers,omitempty"`
	Agents    []agentEntry    `json:"agents"`
	Budgets   json.RawMessage `json:"budgets,omitempty"`
	Secrets   json.RawMessage `json:"secrets,omitempty"`
}

type agentEntry struct {
	UID        uint32          `json:"uid"`
	ID         int             `json:"id"`
	Egress     []string        `json:"egress"`
	Models     json.RawMessage `json:"models,omitempty"`
	Tunnels    int             `json:"tunnels,omitempty"`
	Handshakes int             `json:"handshakes,omitempty"`
	// Worker and TaskBudget (wire.TaskBudget.String) are what the
	// gateway charges its tasks by.
	Worker     bool   `json:"worker,omitempty"`
	TaskBudget string `json:"task_budget,omitempty"`
	// Secrets are its grants: each secret's name and its placeholder.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// ConfigFor is the proxy's config for a spec. Pure.
func ConfigFor(f *spec.Flock) Config {
	return Config{Listen: spec.DefaultProxyListen, Bus: f.Bus.URL(), Policy: ForFlock(f), Gateway: gateway.ForFlock(f, f.Agents), Secrets: f.Secrets}
}

// Encode writes c as JSON, agents in uid order (the same config, the
// same bytes).
func (c Config) Encode() ([]byte, error) {
	providers, err := spec.EncodeProviders(c.Gateway.Listed())
	if err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	budgets, err := spec.EncodeBudgets(c.Gateway.Budgets)
	if err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	ss, err := spec.EncodeSecrets(c.Secrets)
	if err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	for uid := range c.Placeholders {
		if _, ok := c.Policy.Agents[uid]; !ok {
			return nil, fmt.Errorf("proxy config: placeholders for uid %d, which is no agent of the proxy's (no names in its egress)", uid)
		}
	}
	file := configFile{Listen: c.Listen, Bus: c.Bus, Providers: providers, Agents: []agentEntry{}, Budgets: budgets, Secrets: ss}
	for uid, a := range c.Policy.Agents {
		models, err := spec.EncodeGrants(c.Gateway.Agents[uid].Listed())
		if err != nil {
			return nil, fmt.Errorf("proxy config: agent %d: %w", a.ID, err)
		}
		ga := c.Gateway.Agents[uid]
		e := agentEntry{UID: uid, ID: a.ID, Egress: []string{}, Models: models, Tunnels: a.Tunnels, Handshakes: a.Handshakes,
			Worker: ga.Worker, TaskBudget: ga.TaskBudget.String(), Secrets: c.Placeholders[uid]}
		for _, r := range a.Rules {
			e.Egress = append(e.Egress, r.String())
		}
		file.Agents = append(file.Agents, e)
	}
	sort.Slice(file.Agents, func(i, j int) bool { return file.Agents[i].UID < file.Agents[j].UID })
	b, err := json.MarshalIndent(file, "", "  ")
	return append(b, '\n'), err
}

// DecodeConfig reads what Encode wrote, checking every rule, provider
// and grant as the spec does.
func DecodeConfig(b []byte) (Config, error) {
	var file configFile
	if err := json.Unmarshal(b, &file); err != nil {
		return Config{}, fmt.Errorf("proxy config: %w", err)
	}
	if _, err := netip.ParseAddrPort(file.Listen); err != nil {
		return Config{}, fmt.Errorf("proxy config: listen %q: %w", file.Listen, err)
	}
	c := Config{Listen: file.Listen, Bus: file.Bus, Policy: Policy{Agents: map[uint32]AgentRules{}},
		Gateway: gateway.Policy{Providers: map[string]spec.Provider{}, Agents: map[uint32]gateway.Agent{}}}
	providers, err := spec.DecodeProviders(file.Providers, "providers")
	if err != nil {
		return Config{}, fmt.Errorf("proxy config: %w", err)
	}
	for _, pr := range providers {
		c.Gateway.Providers[pr.Name] = pr
	}
	if c.Secrets, err = spec.DecodeSecrets(file.Secrets, "secrets"); err != nil {
		return Config{}, fmt.Errorf("proxy config: %w", err)
	}
	for i, a := range file.Agents {
		if _, dup := c.Policy.Agents[a.UID]; dup {
			return Config{}, fmt.Errorf("proxy config: uid %d twice", a.UID)
		}
		if a.Tunnels < 0 || a.Handshakes < 0 {
			return Config{}, fmt.Errorf("proxy config: agent %d: a negative share (tunnels %d, handshakes %d)", a.ID, a.Tunnels, a.Handshakes)
		}
		rules := AgentRules{ID: a.ID, Tunnels: a.Tunnels, Handshakes: a.Handshakes}
		for _, s := range a.Egress {
			e, err := spec.ParseEgress(s)
			if err != nil {
				return Config{}, fmt.Errorf("proxy config: agent %d: %w", a.ID, err)
			}
			rules.Rules = append(rules.Rules, e)
		}
		c.Policy.Agents[a.UID] = rules
		if len(a.Secrets) > 0 {
			if err := checkPlaceholders(a.Secrets, rules, c.Secrets, fmt.Sprintf("agents[%d].secrets", i)); err != nil {
				return Config{}, fmt.Errorf("proxy config: %w", err)
			}
			if c.Placeholders == nil {
				c.Placeholders = map[uint32]map[string]string{}
			}
			c.Placeholders[a.UID] = a.Secrets
		}
		if len(a.Models) > 0 {
			models, err := grantsOfAList(a.Models)
			if err != nil {
				return Config{}, fmt.Errorf("proxy config: agents[%d].models: %w", i, err)
			}
			gs, err := spec.DecodeGrants(models, fmt.Sprintf("agents[%d].models", i), providers)
			if err != nil {
				return Config{}, fmt.Errorf("proxy config: %w", err)
			}
			ga := gateway.AgentOf(a.ID, gs)
			if ga.TaskBudget, err = wire.ParseTaskBudget(a.TaskBudget); err != nil {
				return Config{}, fmt.Errorf("proxy config: agents[%d].task_budget: %w", i, err)
			}
			ga.Worker = a.Worker
			c.Gateway.Agents[a.UID] = ga
		}
	}
	var ids []int
	for _, a := range file.Agents {
		ids = append(ids, a.ID)
	}
	if c.Gateway.Budgets, err = spec.DecodeBudgets(file.Budgets, "budgets", ids); err != nil {
		return Config{}, fmt.Errorf("proxy config: %w", err)
	}
	return c, nil
}

// grantsOfAList reads an agent's grants as the previous release wrote
// them, a list of {"provider": name, limits...}, as the mapping of names
// to limits the spec writes now (anything else is left as it is): a
// proxy restarted onto a new package before provision rewrote its config
// (a reboot between the two) still starts with the grants in force.
func grantsOfAList(raw json.RawMessage) (json.RawMessage, error) {
	var list []map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '[' {
		return raw, nil
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	m := map[string]map[string]json.RawMessage{}
	for _, g := range list {
		var name string
		if err := json.Unmarshal(g["provider"], &name); err != nil || name == "" {
			return nil, fmt.Errorf("a grant without its provider")
		}
		delete(g, "provider")
		m[name] = g
	}
	return json.Marshal(m)
}

// ReadConfig reads the config file at path.
func ReadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading the proxy config: %w", err)
	}
	return DecodeConfig(b)
}
