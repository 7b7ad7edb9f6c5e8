package units

import "github.com/flockrun/flock/spec"

// PlaceholderUnknown stands in an agent's unit for a placeholder not
// drawn: a spec planned away from its host (explain -f, plan --state),
// where the placeholder key and the secrets' files are not.
const PlaceholderUnknown = "flock-placeholder-drawn-at-provision"

// secretEnv gives an agent granted secrets each one's env names holding
// its placeholder (placeholders: secret name -> placeholder), and points
// its runtimes at the bundle of the system's roots and flock-proxy's CA,
// which terminates its TLS toward the secrets' hosts. Others get nothing.
func secretEnv(f *spec.Flock, a spec.Agent, placeholders map[string]string) []string {
	if !a.HasSecrets() {
		return nil
	}
	var env []string
	for _, name := range a.Secrets {
		s, _ := f.Secret(name)
		p, ok := placeholders[name]
		if !ok {
			p = PlaceholderUnknown
		}
		for _, e := range s.Env {
			env = append(env, e+"="+p)
		}
	}
	for _, e := range spec.CATrustEnv {
		env = append(env, e+"="+spec.SecretsCABundlePath)
	}
	return env
}

// SecretEnvNames are the variables of agent a's unit that hold its
// placeholders, each once: what explain shows in their place.
func SecretEnvNames(f *spec.Flock, a spec.Agent) []string {
	var out []string
	for _, name := range a.Secrets {
		s, _ := f.Secret(name)
		out = append(out, s.Env...)
	}
	return out
}
