package audit

import (
	"fmt"
	"os"
	"slices"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// Secret is a granted secret as the audit looks for it, as a ModelKey
// is: its file, and its salted hash and length to find it in an agent's
// environment without handing it over. Value serves the control alone.
type Secret struct {
	Name, File string
	Salt, Hash string
	Len        int
	Value      string
}

// ReadSecrets reads every secret of f granted to agents (as root: the
// files are root's alone), as flock-proxy reads it (secrets.Value).
func ReadSecrets(f *spec.Flock, agents []spec.Agent) ([]Secret, error) {
	var out []Secret
	for _, s := range plan.GrantedSecrets(f, agents) {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", s.Name, err)
		}
		vb, err := secrets.Value(b)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %s: %w", s.Name, s.File, err)
		}
		v := string(vb)
		salt, hash := lookFor(v)
		out = append(out, Secret{Name: s.Name, File: s.File, Salt: salt, Hash: hash, Len: len(v), Value: v})
	}
	return out, nil
}

// secretProbes are agent a's attempts on the secrets it is granted: read
// each one's file, find it in its environment (which holds a placeholder
// of it), read flock-proxy's CA key and the placeholder key, and send its
// placeholders where flock-proxy must not swap them (elsewhereProbes).
// The controls read the files as root and find the secret in an
// environment that holds it.
func secretProbes(f *spec.Flock, a spec.Agent, t Target) []Probe {
	var ps []Probe
	for _, s := range t.Secrets {
		if !slices.Contains(a.Secrets, s.Name) {
			continue
		}
		ps = append(ps, findSecret("read secret "+s.Name+"'s file", "find secret "+s.Name+" in its environment", s.File, s.Salt, s.Hash, s.Len, s.Value, "secrets")...)
	}
	if !a.HasSecrets() {
		return ps
	}
	for _, k := range []struct{ name, path string }{{"flock-proxy's CA key", spec.SecretsCAPath}, {"the placeholder key", spec.PlaceholderKeyPath}} {
		read := probe.Request{Op: "read-secret", Path: k.path}
		ps = append(ps, Probe{Name: "read " + k.name, Category: "secrets", Req: read, Control: read})
	}
	return append(ps, elsewhereProbes(f, a, t.Placeholders)...)
}

// findSecret are the two probes of a secret held in a root-only file,
// each named: read its file, and find it in the agent's environment; the
// controls read it as root and find it where it is.
func findSecret(readName, findName, file, salt, hash string, n int, value, category string) []Probe {
	read := probe.Request{Op: "read-secret", Path: file}
	find := probe.Request{Op: "secret-in-env", Name: salt, Data: hash, Key: n}
	control := find
	control.Env = []string{"FLOCK_AUDIT_CONTROL=" + value}
	return []Probe{
		{Name: readName, Category: category, Req: read, Control: read},
		{Name: findName, Category: category, Req: find, Control: control},
	}
}
