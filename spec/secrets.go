package spec

import (
	"fmt"
	"maps"
	"net/textproto"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Secrets for APIs other than the models': the operator names each once
// (secrets:) with a root-only file, the hosts it may be sent to, where it
// goes in a request and what requests it may carry; agents are granted
// them by name (an agent's secrets:). An agent holds a placeholder in its
// variables; flock-proxy swaps it for the secret toward those hosts only
// (package secrets). The value is never in the spec.

// Secret is one credential.
type Secret struct {
	Name string // [a-z0-9-]: the grant's key, the metrics' and events' word
	// File is a root-only file holding the secret; only flock-proxy is
	// handed it.
	File string
	// Hosts are the host:port it may be sent to: names, never addresses
	// or wildcards, lower case, in the spec's order.
	Hosts []string
	// Inject is where flock-proxy puts the secret when a request to one
	// of Hosts carries no placeholder of it; zero: only where the agent
	// put its placeholder.
	Inject Inject
	// Env are the variables of a granted agent's unit that hold its
	// placeholder (GH_TOKEN), in the spec's order.
	Env   []string `json:",omitempty"`
	Rules SecretRules
}

// Inject is one place in a request for a secret: a header (Header, the
// secret after Prefix), Basic auth (BasicUser, the secret the password) or
// a query parameter (Query). At most one is set.
type Inject struct {
	Header, Prefix string
	BasicUser      string
	Query          string
}

// IsZero says whether i names no place.
func (i Inject) IsZero() bool { return i == Inject{} }

// SecretRules limit the requests a secret is sent in: a request matching
// a deny rule is refused whatever the allow rules say; with allow rules,
// one of them must match. No rules: every request.
type SecretRules struct {
	Allow, Deny []RequestRule `json:",omitempty"`
}

// RequestRule matches a request by method (none: any) and path prefix,
// whole segments: /repos/acme matches /repos/acme and /repos/acme/x, not
// /repos/acmecorp. Path is clean, starts with / and has no trailing /.
type RequestRule struct {
	Methods []string `json:",omitempty"`
	Path    string
}

// Secret returns the secret called name.
func (f *Flock) Secret(name string) (Secret, bool) {
	for _, s := range f.Secrets {
		if s.Name == name {
			return s, true
		}
	}
	return Secret{}, false
}

// CATrustEnv are the variables through which the runtimes an agent
// granted a secret runs trust flock-proxy's CA beside the system's roots:
// flock sets them, so neither a spec's env nor a secret may.
var CATrustEnv = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"}

// RuleMethods are the methods a rule may name.
var RuleMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

const (
	secretsExample = `secrets: [{name: github, file: /etc/flock/secrets/github, hosts: ["api.github.com:443"], env: [GH_TOKEN]}]`
	secretFile     = "/etc/flock/secrets/github"
	injectExample  = `{header: Authorization, prefix: "Bearer "}, {basic: {user: x-access-token}} or {query: key}`
	ruleExample    = "{methods: [GET, POST], path: /repos/acme}"
)

var (
	queryNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	headerRe    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
)

// framingHeaders carry the request itself, not a credential: a secret in
// one would break or smuggle the request.
var framingHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Content-Type"}

// secrets reads secrets:, a list of {name, file, hosts, inject, env,
// rules}, names unique, in the spec's order.
func (w *walker) secrets(n *yaml.Node, p, root string) []Secret {
	if n.Kind != yaml.SequenceNode {
		w.secretsIncomplete = true
		w.fail(p, "is %s; list the secrets, e.g. %s", kindName(n), secretsExample)
		return nil
	}
	var out []Secret
	seen := map[string]int{}
	w.secretNames = map[string]bool{}
	for i, item := range n.Content {
		ip := index(p, i)
		fs, ok := w.fields(item, ip, secretKeys...)
		if !ok {
			w.secretsIncomplete = true
			continue
		}
		s := Secret{}
		name, good := w.itemName(fs, p, i, "secret", "github", seen)
		s.Name = name
		if fn, given := fs["file"]; !given {
			w.fail(join(ip, "file"), "missing; give the root-only file that holds the secret, e.g. file: %s", secretFile)
			good = false
		} else {
			s.File = w.secretPath(fn, join(ip, "file"), root, secretFile)
		}
		if hn, given := fs["hosts"]; !given {
			w.fail(join(ip, "hosts"), `missing; list the hosts it may be sent to, e.g. hosts: ["api.github.com:443"]`)
			good = false
		} else if s.Hosts = w.secretHosts(hn, join(ip, "hosts")); len(s.Hosts) == 0 {
			good = false
		}
		if in, given := fs["inject"]; given {
			s.Inject = w.inject(in, join(ip, "inject"))
		}
		if en, given := fs["env"]; given {
			s.Env = w.secretEnv(en, join(ip, "env"))
		}
		if rn, given := fs["rules"]; given {
			s.Rules = w.secretRules(rn, join(ip, "rules"))
		}
		if fs["env"] == nil && fs["inject"] == nil {
			w.fail(ip, "has neither env nor inject, so no request would ever carry it; give env: [GH_TOKEN] (the agent's tools send the placeholder) or inject: %s", injectExample)
			good = false
		}
		if good {
			out = append(out, s)
			w.secretNames[s.Name] = true
		} else {
			w.secretsIncomplete = true
		}
	}
	return out
}

// secretHosts reads a secret's hosts: names with their ports, each once.
// Not an address: flock-proxy terminates TLS for the secret's hosts by
// name (the certificate it shows and the one it checks upstream are the
// name's), and an address has no name to check. Not a wildcard: a secret
// goes to the hosts named, each one.
func (w *walker) secretHosts(n *yaml.Node, p string) []string {
	items, ok := w.strList(n, p, `["api.github.com:443"]`)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		w.fail(p, `is empty; list the hosts it may be sent to, e.g. ["api.github.com:443"]`)
	}
	var out []string
	for i, s := range items {
		ip := index(p, i)
		e, err := ParseEgress(s)
		_, port, _ := strings.Cut(s, ":")
		switch {
		case port == "80":
			w.fail(ip, "%q is plain HTTP (port 80); flock-proxy swaps a secret in only over TLS, so write the host's HTTPS port, e.g. api.github.com:443", s)
		case err != nil:
			w.fail(ip, "%q is not a host name with its port; write the name and the port it serves HTTPS on, e.g. api.github.com:443", s)
		case !e.IsName():
			w.fail(ip, "%q is an address; flock-proxy swaps a secret in only over TLS it terminates by name (the certificate it shows and the one it checks upstream are the name's), so write the host's name with its port, e.g. api.github.com:443", s)
		case strings.HasPrefix(e.Name, "*."):
			w.fail(ip, "%q is a wildcard; a secret is sent only to the hosts named (a wildcard would hand it to any host under the domain, and flock-proxy terminates TLS by exact name), so list each host, e.g. api.github.com:443", s)
		case slices.Contains(out, e.String()):
			w.fail(ip, "%q is listed twice; keep one", s)
		default:
			out = append(out, e.String())
		}
	}
	return out
}

// inject reads where the proxy puts a secret: exactly one of header
// (with prefix), basic or query.
func (w *walker) inject(n *yaml.Node, p string) Inject {
	fs, ok := w.fields(n, p, injectKeys...)
	if !ok {
		return Inject{}
	}
	var in Inject
	given := 0
	for _, k := range []string{"header", "basic", "query"} {
		if _, ok := fs[k]; ok {
			given++
		}
	}
	if given != 1 {
		w.fail(p, "gives %d of header, basic and query; give exactly one, e.g. %s", given, injectExample)
		return Inject{}
	}
	if hn, ok := fs["header"]; ok {
		if s, ok := w.str(hn, join(p, "header"), "Authorization"); ok {
			h := textproto.CanonicalMIMEHeaderKey(s)
			switch {
			case !headerRe.MatchString(s):
				w.fail(join(p, "header"), "%q is not a header name; write one such as Authorization or X-Api-Key", s)
			case slices.Contains(framingHeaders, h) || strings.HasPrefix(h, "Proxy-"):
				w.fail(join(p, "header"), "%s frames the request rather than carrying a credential; write the header the API reads its key from, e.g. Authorization", h)
			default:
				in.Header = h
			}
		}
	}
	if pn, ok := fs["prefix"]; ok {
		if s, ok := w.str(pn, join(p, "prefix"), `"Bearer "`); ok {
			switch {
			case in.Header == "" && fs["header"] == nil:
				w.fail(join(p, "prefix"), "is for a header; remove it, or write header: Authorization with it")
			case len(s) > 64 || strings.ContainsAny(s, "\x00\r\n"):
				w.fail(join(p, "prefix"), "has a line break, a NUL or more than 64 bytes; write what comes before the secret, e.g. \"Bearer \"")
			default:
				in.Prefix = s
			}
		}
	}
	if bn, ok := fs["basic"]; ok {
		if bf, ok := w.fields(bn, join(p, "basic"), "user"); ok {
			un, given := bf["user"]
			if !given {
				w.fail(join(join(p, "basic"), "user"), "missing; give the user name Basic auth sends with the secret as its password, e.g. user: x-access-token")
			} else if s, ok := w.str(un, join(join(p, "basic"), "user"), "x-access-token"); ok {
				if s == "" || len(s) > 64 || strings.ContainsAny(s, ":\x00\r\n") {
					w.fail(join(join(p, "basic"), "user"), "%q is not a Basic auth user name; write one without a colon, at most 64 bytes, e.g. x-access-token", s)
				} else {
					in.BasicUser = s
				}
			}
		}
	}
	if qn, ok := fs["query"]; ok {
		if s, ok := w.str(qn, join(p, "query"), "key"); ok {
			if !queryNameRe.MatchString(s) {
				w.fail(join(p, "query"), "%q is not a query parameter's name; use letters, digits, _, . and -, at most 64, e.g. key", s)
			} else {
				in.Query = s
			}
		}
	}
	return in
}

// secretEnv reads the variables a granted agent's unit gets holding the
// placeholder: names flock does not set itself, each once.
func (w *walker) secretEnv(n *yaml.Node, p string) []string {
	return w.uniqueItems(n, p, "[GH_TOKEN, GITHUB_TOKEN]", func(s string) string {
		switch {
		case !envName.MatchString(s):
			return fmt.Sprintf("%q is not a variable name; use letters, digits and _, not starting with a digit, e.g. GH_TOKEN", s)
		case ReservedEnv(s):
			return fmt.Sprintf("flock sets %s itself (AGENT_*, NATS_*, FLOCK_*, HOME, PATH, SHARED_DIR, CREDENTIALS_DIRECTORY and the proxy's variables); choose the name the agent's tools read, e.g. GH_TOKEN", s)
		case slices.Contains(CATrustEnv, strings.ToUpper(s)):
			return fmt.Sprintf("flock sets %s itself for agents granted secrets (so their runtimes trust flock-proxy's CA); choose the name the agent's tools read, e.g. GH_TOKEN", s)
		}
		return ""
	})
}

// secretRules reads {allow: [...], deny: [...]}.
func (w *walker) secretRules(n *yaml.Node, p string) SecretRules {
	fs, ok := w.fields(n, p, rulesKeys...)
	if !ok {
		return SecretRules{}
	}
	var r SecretRules
	if an, ok := fs["allow"]; ok {
		r.Allow = w.requestRules(an, join(p, "allow"))
	}
	if dn, ok := fs["deny"]; ok {
		r.Deny = w.requestRules(dn, join(p, "deny"))
	}
	return r
}

// requestRules reads a list of {methods, path}.
func (w *walker) requestRules(n *yaml.Node, p string) []RequestRule {
	if n.Kind != yaml.SequenceNode {
		w.fail(p, "is %s; write a list of rules, e.g. [%s]", kindName(n), ruleExample)
		return nil
	}
	var out []RequestRule
	for i, item := range n.Content {
		ip := index(p, i)
		fs, ok := w.fields(item, ip, ruleKeys...)
		if !ok {
			continue
		}
		r := RequestRule{Path: "/"}
		if mn, ok := fs["methods"]; ok {
			r.Methods = w.methods(mn, join(ip, "methods"))
		}
		if pn, ok := fs["path"]; ok {
			r.Path = w.rulePath(pn, join(ip, "path"))
		}
		out = append(out, r)
	}
	return out
}

func (w *walker) methods(n *yaml.Node, p string) []string {
	return w.uniqueItems(n, p, "[GET, POST]", func(s string) string {
		if !slices.Contains(RuleMethods, s) {
			return fmt.Sprintf("%q is not a method a rule names; choose %s (upper case)", s, or(RuleMethods))
		}
		return ""
	})
}

// rulePath reads a path prefix: absolute and clean, as a request's path
// is compared once cleaned; a trailing / is dropped (segments are whole).
func (w *walker) rulePath(n *yaml.Node, p string) string {
	s, ok := w.str(n, p, "/repos/acme")
	if !ok {
		return "/"
	}
	t := strings.TrimSuffix(s, "/")
	switch {
	case !strings.HasPrefix(s, "/"):
		w.fail(p, "%q does not start with /; write the path prefix as the request has it, e.g. /repos/acme", s)
	case t != "" && path.Clean(t) != t:
		w.fail(p, "%q is not a clean path (a request's path is cleaned before it is compared); write %s", s, path.Clean(t))
	case strings.ContainsAny(s, "?#%\x00\r\n"):
		w.fail(p, "%q has a ?, #, %% or line break; write the decoded path alone, e.g. /repos/acme", s)
	case t == "":
		return "/"
	default:
		return t
	}
	return "/"
}

// secretGrants reads an agent's secrets: the names of secrets, each once.
// Whether each is one of secrets: is checked where the grant is written.
func (w *walker) secretGrants(n *yaml.Node, p string) []string {
	return w.uniqueItems(n, p, "[github]", func(s string) string {
		switch {
		case w.secretsIncomplete:
		case len(w.secretNames) == 0:
			return fmt.Sprintf("%q names a secret, but the spec lists none; add it, e.g. %s", s, secretsExample)
		case !w.secretNames[s]:
			return fmt.Sprintf("%q is not one of the secrets; choose %s, or add it to secrets", s, or(slices.Sorted(maps.Keys(w.secretNames))))
		}
		return ""
	})
}

// uniqueItems reads a list of strings, each once, keeping those check
// finds nothing wrong with (its problem, or "").
func (w *walker) uniqueItems(n *yaml.Node, p, example string, check func(string) string) []string {
	items, ok := w.strList(n, p, example)
	if !ok {
		return nil
	}
	var out []string
	for i, s := range items {
		if problem := check(s); problem != "" {
			w.fail(index(p, i), "%s", problem)
		} else if slices.Contains(out, s) {
			w.fail(index(p, i), "%q is listed twice; keep one", s)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// secretGrantRules checks an agent's grants against its other fields: a
// variable of a granted secret is set by nothing else (its env, another
// secret, a model grant), and its egress reaches each of the secret's
// hosts (a grant opens nothing by itself).
func (w *walker) secretGrantRules(a Agent, p string, secrets []Secret) {
	if !a.HasSecrets() {
		return
	}
	for _, k := range CATrustEnv {
		if _, set := a.Env[k]; set {
			w.fail(join(join(p, "env"), k), "flock sets %s itself for the agents granted secrets (the system's roots and flock-proxy's CA); remove it", k)
		}
	}
	owner := map[string]string{} // variable -> what sets it
	for _, g := range a.Models {
		for _, k := range GrantEnvNames(w.providerKinds[g.Provider]) {
			owner[k] = "the grant of provider " + g.Provider
		}
	}
	for i, name := range a.Secrets {
		ip := index(join(p, "secrets"), i)
		s, ok := secretNamed(secrets, name)
		if !ok {
			continue
		}
		for _, k := range s.Env {
			if _, set := a.Env[k]; set {
				w.fail(join(join(p, "env"), k), "flock sets %s itself for the grant of secret %s (a placeholder: the secret stays with flock-proxy); remove it", k, name)
			} else if other, set := owner[k]; set {
				w.fail(ip, "secret %s's variable %s is also set for %s; give one of them another variable", name, k, other)
			}
			owner[k] = "secret " + name
		}
		for _, h := range s.Hosts {
			if !a.reaches(h) {
				w.fail(ip, "secret %s is bound to %s, which the agent's egress does not allow; add %q to its egress, or remove the grant", name, h, h)
			}
		}
	}
}

// reaches says whether one of a's egress names allows hostport.
func (a Agent) reaches(hostport string) bool {
	e, err := ParseEgress(hostport)
	if err != nil {
		return false
	}
	for _, r := range a.Egress {
		if r.MatchName(e.Name, e.Port) {
			return true
		}
	}
	return false
}

func secretNamed(ss []Secret, name string) (Secret, bool) {
	f := Flock{Secrets: ss}
	return f.Secret(name)
}

// HasSecrets says whether agent a is granted a secret.
func (a Agent) HasSecrets() bool { return len(a.Secrets) > 0 }
