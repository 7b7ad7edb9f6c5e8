package explain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Secret is one secret an agent is granted: where flock-proxy may send
// it and how, and the variables that hold the agent's placeholder. Never
// its value nor the placeholder (docs/secrets.md).
type Secret struct {
	Name  string   `json:"name"`
	File  string   `json:"file"` // root's, handed to flock-proxy alone
	Hosts []string `json:"hosts"`
	// Inject is where flock-proxy puts it in a request that carries no
	// placeholder of it ("": only where the agent put its placeholder).
	Inject string   `json:"inject,omitempty"`
	Env    []string `json:"env"`
	// Allow and Deny are its rules, "METHODS /path" ("any" for every
	// method); none: every request to its hosts.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Secrets are agent a's secrets in f, in its grant's order.
func Secrets(f *spec.Flock, a spec.Agent) []Secret {
	out := []Secret{}
	for _, name := range a.Secrets {
		s, _ := f.Secret(name)
		out = append(out, Secret{Name: s.Name, File: s.File, Hosts: s.Hosts, Inject: injectText(s.Inject),
			Env: append([]string{}, s.Env...), Allow: rulesText(s.Rules.Allow), Deny: rulesText(s.Rules.Deny)})
	}
	return out
}

func injectText(in spec.Inject) string {
	switch {
	case in.Header != "":
		return fmt.Sprintf("header %s: %s<secret>", in.Header, in.Prefix)
	case in.BasicUser != "":
		return "Basic auth, user " + in.BasicUser
	case in.Query != "":
		return "query parameter " + in.Query
	}
	return ""
}

func rulesText(rs []spec.RequestRule) []string {
	var out []string
	for _, r := range rs {
		m := "any"
		if len(r.Methods) > 0 {
			m = strings.Join(r.Methods, ",")
		}
		out = append(out, m+" "+r.Path)
	}
	return out
}

// SecretLines say what an agent's secrets are, for the text forms.
func SecretLines(ss []Secret) []string {
	if len(ss) == 0 {
		return nil
	}
	out := []string{"# secrets (flock-proxy swaps the agent's placeholder for each, toward its hosts alone; the agent trusts its CA through " + strings.Join(spec.CATrustEnv, ", ") + "):"}
	for _, s := range ss {
		line := fmt.Sprintf("#   %s: file %s (flock-proxy's alone), hosts %s", s.Name, s.File, strings.Join(s.Hosts, " "))
		if len(s.Env) > 0 {
			line += ", placeholder in " + strings.Join(s.Env, " ")
		}
		if s.Inject != "" {
			line += ", put in by the proxy as " + s.Inject
		}
		rules := "every request"
		if len(s.Allow)+len(s.Deny) > 0 {
			rules = "allow " + orNone(strings.Join(s.Allow, "; ")) + ", deny " + orNone(strings.Join(s.Deny, "; "))
		}
		out = append(out, line+"; "+rules)
	}
	return out
}

// undrawn says whether unit u holds a placeholder not drawn.
func undrawn(u units.Unit) bool {
	for _, p := range u.Properties {
		if env, ok := p.Value.([]string); ok && p.Name == "Environment" {
			return slices.ContainsFunc(env, func(kv string) bool { return strings.HasSuffix(kv, "="+units.PlaceholderUnknown) })
		}
	}
	return false
}

// masked is what explain shows for a placeholder: the variable, not its
// value (explain is about the design, and a placeholder is drawn per host).
const masked = "(placeholder)"

// maskPlaceholders is an Environment= value (NAME=value, spaced) with
// each of names' values masked.
func maskPlaceholders(env string, names []string) string {
	if len(names) == 0 {
		return env
	}
	fields := strings.Split(env, " ")
	for i, kv := range fields {
		if name, _, ok := strings.Cut(kv, "="); ok && slices.Contains(names, name) {
			fields[i] = name + "=" + masked
		}
	}
	return strings.Join(fields, " ")
}

// maskPlaceholders masks agent a's placeholders wherever r shows its
// unit's environment: the property and its drift. Where the plan could
// not draw them (undrawn: explained by one who is not root), the unit's
// hash and environment cannot be compared, and r says so.
func (r *Report) maskPlaceholders(f *spec.Flock, a spec.Agent, undrawn bool) {
	names := units.SecretEnvNames(f, a)
	if undrawn {
		r.Drift = slices.DeleteFunc(r.Drift, func(d Drift) bool {
			return d.Kind == "property" && (d.What == "Environment" || d.What == "Description")
		})
		r.Unread = append(r.Unread, "its unit's hash and environment: its secrets' placeholders are root's to draw")
	}
	for i, p := range r.Unit.Properties {
		if p.Name == "Environment" {
			r.Unit.Properties[i].Live, r.Unit.Properties[i].Planned = maskPlaceholders(p.Live, names), maskPlaceholders(p.Planned, names)
		}
	}
	for i, d := range r.Drift {
		if d.What == "Environment" {
			r.Drift[i].Want, r.Drift[i].Have = maskPlaceholders(d.Want, names), maskPlaceholders(d.Have, names)
		}
	}
}
