package audit

import (
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// elsewhereName is the name the audit addresses a request to on a
// connection opened to another host: no host has it.
const elsewhereName = "flock-audit.invalid"

// elsewhereProbes send agent a's placeholders where flock-proxy must not
// make them their secret, on the connections it intercepts (the CONNECTs
// to a secret's hosts: elsewhere a placeholder travels in a tunnel
// flock-proxy cannot see into, and is worth nothing there). For each
// secret S granted to a, on the connection to its first host H:
//
//   - a request addressed to another name (elsewhereName) with S's
//     placeholder where S's inject puts it (else as a bearer token); a
//     secret a holds no placeholder of (no env) is sent with none, and
//     flock-proxy would inject it. flock-proxy must answer 421;
//   - where another secret of a's has a host H2 that is not S's, S's
//     placeholder on the connection to H2, addressed to it: flock-proxy
//     must answer 403, S "is not bound to" H2.
//
// The probe reads the placeholder from its unit's environment: no request
// to the agent holds one. Each control is the request where S is bound,
// from outside the unit as a's uid (flock-proxy knows an agent by its
// socket's uid), its placeholder in the control's environment: addressed
// to H on the connection to H. It reaches H with the secret swapped in,
// so it is a GET of a path naming the audit (a real API answers 401 or
// 404 and nothing changes), the first of /flock-audit and
// ALLOW-PATH/flock-audit that S's rules allow. It succeeds when
// flock-proxy does not refuse it: it is swapped and sent, whatever H
// answers. Where S's rules allow no such GET, flock-proxy refuses it by
// them, and that refusal is its success: flock-proxy intercepted the
// connection and judged the request as S's (probe.Send.RulesRefuse); a
// refusal as misdirected or unbound never is.
func elsewhereProbes(f *spec.Flock, a spec.Agent, placeholders map[string]string) []Probe {
	var granted []spec.Secret
	for _, name := range a.Secrets {
		if s, ok := f.Secret(name); ok && len(s.Hosts) > 0 {
			granted = append(granted, s)
		}
	}
	uid := int(f.UID(a.ID))
	var ps []Probe
	for _, s := range granted {
		h := s.Hosts[0]
		name, _, _ := net.SplitHostPort(h)
		p, allowed := controlPath(s, h)
		v := ""
		if len(s.Env) > 0 {
			v = s.Env[0]
		}
		send := func(addr, to string) probe.Request {
			return probe.Request{Op: "secret-elsewhere", Addr: addr, Send: &probe.Send{Host: to, Path: p, Var: v, Inject: s.Inject}}
		}
		control := func() probe.Request {
			c := send(h, name)
			c.Key, c.Send.RulesRefuse = uid, !allowed
			c.Env = []string{"HTTPS_PROXY=http://" + spec.DefaultProxyListen}
			if ph, ok := placeholders[s.Name]; ok && v != "" {
				c.Env = append(c.Env, v+"="+ph)
			}
			return c
		}
		what := fmt.Sprintf("send secret %s's placeholder", s.Name)
		if v == "" {
			what = fmt.Sprintf("have secret %s injected in a request", s.Name)
		}
		ps = append(ps, Probe{Name: fmt.Sprintf("%s to another name on %s's connection", what, h), Category: "secrets",
			Req: send(h, elsewhereName), Control: control()})
		if v == "" {
			continue // a holds no placeholder of s to send elsewhere
		}
		if h2 := outside(s, granted); h2 != "" {
			name2, _, _ := net.SplitHostPort(h2)
			ps = append(ps, Probe{Name: fmt.Sprintf("%s to %s", what, h2), Category: "secrets",
				Req: send(h2, name2), Control: control()})
		}
	}
	return ps
}

// outside is the first host of another of granted that is not one of
// s's ("": none).
func outside(s spec.Secret, granted []spec.Secret) string {
	for _, o := range granted {
		if o.Name == s.Name {
			continue
		}
		for _, h := range o.Hosts {
			if !slices.ContainsFunc(s.Hosts, func(x string) bool { return strings.EqualFold(x, h) }) {
				return h
			}
		}
	}
	return ""
}

// controlPath is the path of the GET the control of secret s sends to
// host: the first of /flock-audit and each allow rule's path with
// /flock-audit below it that s's rules allow, judged by flock-proxy's own
// judge (secrets.Swap); allowed false: none is, and it is /flock-audit.
func controlPath(s spec.Secret, host string) (p string, allowed bool) {
	const ph = "flock-audit-placeholder"
	b := secrets.Bindings{secrets.Bind(s, []byte("x"), ph)}
	paths := []string{"/flock-audit"}
	for _, r := range s.Rules.Allow {
		paths = append(paths, path.Join("/", r.Path, "flock-audit"))
	}
	for _, p := range paths {
		req, err := http.NewRequest(http.MethodGet, "https://"+host+p, nil)
		if err != nil {
			continue
		}
		req.Header.Set("Authorization", "Bearer "+ph)
		if _, err := secrets.Swap(req, b, host); err == nil {
			return p, true
		}
	}
	return "/flock-audit", false
}
