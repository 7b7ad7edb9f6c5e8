package secrets

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/flockrun/flock/spec"
)

// Binding is one secret granted to an agent, as the proxy holds it: its
// value, the placeholder the agent holds, where it may go and what it may
// carry.
type Binding struct {
	Name        string
	Secret      []byte
	Placeholder string
	Hosts       map[string]bool // host:port, lower case
	Inject      spec.Inject
	Rules       spec.SecretRules
}

// Bindings are an agent's, in the order of its grants: where two could go
// in the same place, the first does.
type Bindings []Binding

// Bind is s's binding, with its value and the agent's placeholder.
func Bind(s spec.Secret, secret []byte, placeholder string) Binding {
	hosts := map[string]bool{}
	for _, h := range s.Hosts {
		hosts[strings.ToLower(h)] = true
	}
	return Binding{Name: s.Name, Secret: secret, Placeholder: placeholder, Hosts: hosts, Inject: s.Inject, Rules: s.Rules}
}

// The kinds of refusal, for errors.Is.
var (
	// ErrUnboundHost: a placeholder sent toward a host its secret is not
	// bound to. Never swapped.
	ErrUnboundHost = errors.New("a secret's placeholder toward a host it is not bound to")
	// ErrRuleDenied: a request outside its secret's rules (a 403).
	ErrRuleDenied = errors.New("a request outside its secret's rules")
)

// Refusal is why Swap left a request alone: its kind, the secret, the
// host, and for a rule the rule that decided.
type Refusal struct {
	Kind         error
	Secret, Host string
	Rule         string // "deny[0] DELETE /repos", "no allow rule"
	Method, Path string
}

func (r *Refusal) Error() string {
	if r.Kind == ErrUnboundHost {
		return fmt.Sprintf("secret %s is not bound to %s: its placeholder is not sent there", r.Secret, r.Host)
	}
	return fmt.Sprintf("secret %s may not be sent in %s %s to %s: %s", r.Secret, r.Method, r.Path, r.Host, r.Rule)
}

func (r *Refusal) Unwrap() error { return r.Kind }

// Outcome is what Swap put in a request, by secret name.
type Outcome struct {
	Swapped  []string // for the placeholders it carried
	Injected []string // where their inject says, as it carried none
}

// Swap puts the secrets of b into req, a request toward host (host:port):
// each placeholder for its secret in every header's value, in Basic auth
// (decoded, swapped in the user and the password, encoded again) and in
// the query (decoded: a percent-encoded placeholder is found too); and a
// secret bound to host whose placeholder the request does not carry where
// its inject says, if that place is free. The body is not read: it is the
// agent's content (a commit, a message), where a placeholder may well be
// quoted, and an API reads its credential from a header or the query.
//
// It refuses, changing nothing, a placeholder of a secret not bound to
// host (ErrUnboundHost) and a request its secret's rules do not allow
// (ErrRuleDenied); either is a *Refusal.
func Swap(req *http.Request, b Bindings, host string) (Outcome, error) {
	host = strings.ToLower(host)
	carried := make([]bool, len(b))
	var use []int // the bindings whose secret the request will carry
	for i := range b {
		carried[i] = carries(req, b[i].Placeholder)
		switch {
		case carried[i] && !b[i].Hosts[host]:
			return Outcome{}, &Refusal{Kind: ErrUnboundHost, Secret: b[i].Name, Host: host}
		case carried[i] || b[i].Hosts[host] && !b[i].Inject.IsZero():
			use = append(use, i)
		}
	}
	var out Outcome
	for _, i := range use {
		if rule, ok := allowed(b[i].Rules, req); !ok {
			return Outcome{}, &Refusal{Kind: ErrRuleDenied, Secret: b[i].Name, Host: host, Rule: rule, Method: req.Method, Path: req.URL.Path}
		}
	}
	for _, i := range use {
		switch {
		case carried[i]:
			replace(req, b[i].Placeholder, string(b[i].Secret))
			out.Swapped = append(out.Swapped, b[i].Name)
		case inject(req, b[i].Inject, string(b[i].Secret)):
			out.Injected = append(out.Injected, b[i].Name)
		}
	}
	return out, nil
}

// carries says whether req holds p where Swap looks.
func carries(req *http.Request, p string) bool {
	found := false
	edit(req, func(s string) string {
		found = found || strings.Contains(s, p)
		return s
	})
	return found
}

// replace puts secret for every p where Swap looks.
func replace(req *http.Request, p, secret string) {
	edit(req, func(s string) string { return strings.ReplaceAll(s, p, secret) })
}

// edit passes every place Swap looks through f: each header value, the
// user and password of Basic auth, and each name and value of the query,
// decoded. A part f leaves alone is left as it was, byte for byte.
func edit(req *http.Request, f func(string) string) {
	for k, vs := range req.Header {
		for j, v := range vs {
			if k == "Authorization" || k == "Proxy-Authorization" {
				v = editBasic(v, f)
			}
			vs[j] = f(v)
		}
	}
	if req.URL != nil && req.URL.RawQuery != "" {
		parts := strings.Split(req.URL.RawQuery, "&")
		for i, part := range parts {
			name, value, eq := strings.Cut(part, "=")
			name, value = editQuery(name, f), editQuery(value, f)
			if eq {
				parts[i] = name + "=" + value
			} else {
				parts[i] = name
			}
		}
		req.URL.RawQuery = strings.Join(parts, "&")
	}
}

// editBasic passes Basic credentials' user and password through f.
func editBasic(v string, f func(string) string) string {
	scheme, enc, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return v
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return v
	}
	user, pass, ok := strings.Cut(string(dec), ":")
	if !ok {
		return v
	}
	u, p := f(user), f(pass)
	if u == user && p == pass {
		return v
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))
}

// editQuery passes one encoded part of a query through f, decoded; a part
// that does not decode is passed as it is.
func editQuery(raw string, f func(string) string) string {
	dec, err := url.QueryUnescape(raw)
	if err != nil {
		return f(raw)
	}
	if g := f(dec); g != dec {
		return url.QueryEscape(g)
	}
	return raw
}

// inject puts secret where in says, if req has nothing there.
func inject(req *http.Request, in spec.Inject, secret string) bool {
	switch {
	case in.Header != "" && req.Header.Get(in.Header) == "":
		req.Header.Set(in.Header, in.Prefix+secret)
	case in.BasicUser != "" && req.Header.Get("Authorization") == "":
		req.SetBasicAuth(in.BasicUser, secret)
	case in.Query != "" && !req.URL.Query().Has(in.Query):
		q := url.QueryEscape(in.Query) + "=" + url.QueryEscape(secret)
		if req.URL.RawQuery != "" {
			q = req.URL.RawQuery + "&" + q
		}
		req.URL.RawQuery = q
	default:
		return false
	}
	return true
}

// allowed judges req by rs: a deny rule that matches refuses it whatever
// the allow rules say; then with allow rules one must match. The path is
// judged decoded and cleaned, so /repos/acme/../other is /repos/other.
// Deny compares path and method without case and allow with it: a
// server that ignores case (GitHub's owners and repositories) cannot be
// reached past a deny rule by another spelling, nor through an allow
// rule by one it does not name. It returns the rule that decided.
func allowed(rs spec.SecretRules, req *http.Request) (string, bool) {
	p := path.Clean("/" + req.URL.Path)
	for i, r := range rs.Deny {
		if matches(r, strings.ToUpper(req.Method), strings.ToLower(p), strings.ToLower(r.Path)) {
			return "deny[" + fmt.Sprint(i) + "] " + ruleString(r), false
		}
	}
	if len(rs.Allow) == 0 {
		return "", true
	}
	for i, r := range rs.Allow {
		if matches(r, req.Method, p, r.Path) {
			return "allow[" + fmt.Sprint(i) + "] " + ruleString(r), true
		}
	}
	return "no allow rule matches", false
}

// matches says whether a request of method to the clean path p matches
// r, whose path prefix is prefix: whole segments.
func matches(r spec.RequestRule, method, p, prefix string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

func ruleString(r spec.RequestRule) string {
	m := "any method"
	if len(r.Methods) > 0 {
		m = strings.Join(r.Methods, ",")
	}
	return m + " " + r.Path
}
