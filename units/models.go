package units

import (
	"github.com/flockrun/flock/spec"
)

// ModelKeyPlaceholder is what an agent's ANTHROPIC_API_KEY and
// OPENAI_API_KEY hold: the SDKs insist on a key, and this one is worth
// nothing anywhere. flock-proxy drops it and adds the provider's.
const ModelKeyPlaceholder = "flock-placeholder-the-proxy-adds-the-key"

// ProxyStateDirs are where systemd keeps ProxyUnit's
// StateDirectory=flock-proxy (the model gateway's counts): a DynamicUser
// unit's lives under /var/lib/private, reached through a symlink.
var ProxyStateDirs = []string{"/var/lib/private/flock-proxy", "/var/lib/flock-proxy"}

// modelEnv points the SDKs and tools of an agent at the gateway for its
// grants: each grant's base URL in FLOCK_MODEL_URL_<NAME>, and for the
// first grant of each kind (as its models: lists them) the variables the official
// SDKs and Claude Code read, with a placeholder key. Limits are not here:
// they change without restarting the agent (the proxy reloads).
func modelEnv(f *spec.Flock, a spec.Agent) []string {
	var env []string
	done := map[spec.ProviderKind]bool{}
	for _, g := range a.Models {
		p, ok := f.Provider(g.Provider)
		if !ok {
			continue
		}
		url := spec.GatewayURL(spec.DefaultProxyListen, p.Name)
		env = append(env, spec.GrantURLEnv(p.Name)+"="+url)
		if done[p.Kind] {
			continue
		}
		done[p.Kind] = true
		names := spec.GrantEnvNames(p.Kind)
		env = append(env, names[0]+"="+url, names[1]+"="+ModelKeyPlaceholder)
	}
	return env
}
