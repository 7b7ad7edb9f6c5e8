package plan

// Tier: unit (fakes).

import (
	"context"
	"strings"
	"testing"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// An agent granted a model API brings the proxy up (with the keys as
// its unit's credentials, never the agent's); a new limit reloads the
// proxy and restarts no agent; a new grant restarts that agent alone (its
// environment names the gateway).
func TestProxyFollowsGrants(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	granted := func(limit, grants string) *spec.Flock {
		return mustParse(t, `providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}
  - {name: ollama, kind: openai, url: "http://127.0.0.1:11434/v1"}
agents:
  - id: 1
    models: {anthropic: {tokens_per_day: `+limit+`}}
  - id: 2
    models: {`+grants+`}
  - id: 3
`)
	}
	p := provision(t, h, granted("1M", ""))
	for _, k := range []Kind{WriteProxyConf, InstallProxy, StartProxy} {
		if p.Count(k) != 1 {
			t.Errorf("%s: %d changes, want 1\n%s", k, p.Count(k), p)
		}
	}
	st, _ := fk.units.Service(ctx, units.ProxyUnit)
	if !strings.Contains(string(st.File), "LoadCredential=model-key-anthropic:/etc/flock/keys/anthropic\n") {
		t.Errorf("the proxy's unit lacks the key's credential:\n%s", st.File)
	}
	c, err := proxy.DecodeConfig(fk.proxy.File)
	f := granted("1M", "")
	if err != nil || c.Gateway.Agents[f.UID(1)].Grants["anthropic"].TokensPerDay != 1e6 || len(c.Gateway.Providers) != 1 || strings.Contains(string(fk.proxy.File), "sk-") {
		t.Errorf("proxy config %+v %v\n%s", c.Gateway, err, fk.proxy.File)
	}
	if _, ok := c.Policy.Agents[f.UID(1)]; !ok {
		t.Errorf("agent 1 (a grant, no names) is not the proxy's: its CONNECTs would be refused as no agent's")
	}
	p = provision(t, h, granted("2M", ""))
	if p.Count(ReloadProxy) != 1 || p.Count(StartProxy) != 0 || p.Count(StartUnit)+p.Count(RestartUnit) != 0 || len(p.Changes) != 2 {
		t.Errorf("a new limit: %s; want the proxy's config written and reloaded, nothing else", p)
	}

	p = provision(t, h, granted("2M", "ollama: {}"))
	if !strings.Contains(p.String(), spec.UnitName(2)) || strings.Contains(p.String(), spec.UnitName(1)) || strings.Contains(p.String(), spec.UnitName(3)) {
		t.Errorf("a grant to agent 2: %s; want agent 2's unit alone changed", p)
	}
}
