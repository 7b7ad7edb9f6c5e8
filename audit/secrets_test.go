package audit

// Tier: unit.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/spec"
)

// An agent granted a secret tries its file, its value in its environment,
// the CA key and the placeholder key; no request it receives holds the
// secret, every control does what it must not. An agent without the
// grant tries none of it.
func TestSecretProbes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "github")
	if err := os.WriteFile(file, []byte("ghp_secret0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := spec.Parse([]byte(`secrets:
  - {name: github, file: ` + file + `, hosts: ["api.github.com:443"], env: [GH_TOKEN]}
agents:
  - {id: 1, egress: ["api.github.com:443"], secrets: [github]}
  - {id: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := ReadSecrets(f, f.Agents)
	if err != nil || len(ss) != 1 || ss[0].Value != "ghp_secret0123" || ss[0].Hash != probe.SecretHash(ss[0].Salt, "ghp_secret0123") {
		t.Fatalf("secrets %+v, %v", ss, err)
	}
	probes := func(id int) (names []string) {
		a, _ := f.Agent(id)
		for _, p := range Plan(f, a, Target{Secrets: ss}, Colluder{}) {
			if p.Category != "secrets" {
				continue
			}
			names = append(names, p.Name)
			if b, _ := json.Marshal(p.Req); strings.Contains(string(b), "ghp_secret") || len(p.Req.Env) > 0 {
				t.Errorf("agent %d's request %s holds the secret", id, b)
			}
			if p.Req.Op == "secret-in-env" && !slices.Equal(p.Control.Env, []string{"FLOCK_AUDIT_CONTROL=ghp_secret0123"}) {
				t.Errorf("the control of %q looks in %q", p.Name, p.Control.Env)
			}
		}
		return names
	}
	want := []string{"read secret github's file", "find secret github in its environment", "read flock-proxy's CA key", "read the placeholder key",
		"send secret github's placeholder to another name on api.github.com:443's connection"}
	if got := probes(1); !slices.Equal(got, want) {
		t.Errorf("agent 1's probes %q, want %q", got, want)
	}
	if got := probes(2); len(got) != 0 {
		t.Errorf("agent 2, granted nothing, probes %q", got)
	}
}

// Each secret granted to an agent is sent to another name on its host's
// connection (its placeholder from the unit's environment, or none where
// it is injected alone); where another of its secrets has a host outside
// its own, its placeholder goes there too. The agent's requests name the
// variable and never hold a placeholder; each control, as the agent's uid
// with the placeholder in its environment, sends the GET the secret's
// rules allow to its own host. An agent granted nothing sends nothing.
func TestSecretElsewhereProbes(t *testing.T) {
	f, err := spec.Parse([]byte(`secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["api.github.com:443", "github.com:443"]
    inject: {basic: {user: x-access-token}}
    env: [GH_TOKEN]
    rules: {allow: [{methods: [GET, POST], path: /repos/acme}]}
  - {name: rest, file: /etc/flock/secrets/rest, hosts: ["rest.example:443"], env: [REST_KEY], rules: {allow: [{methods: [POST], path: /v1}]}}
  - {name: git, file: /etc/flock/secrets/git, hosts: ["github.com:443"], inject: {basic: {user: x-access-token}}}
agents:
  - {id: 1, egress: ["api.github.com:443", "github.com:443"], secrets: [github]}
  - {id: 2, egress: ["api.github.com:443", "github.com:443", "rest.example:443"], secrets: [github, rest]}
  - {id: 3, egress: ["github.com:443", "rest.example:443"], secrets: [git, rest]}
  - {id: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	phs := map[string]string{"github": "ghp_PLACEHOLDER", "rest": "rest-PLACEHOLDER"}
	type want struct {
		secret, name, addr, host, v, path, env string
		rulesRefuse                            bool
	}
	// The controls: github's GET is allowed under /repos/acme, rest's
	// rules allow none (POST alone), git is injected.
	gh := want{secret: "github", v: "GH_TOKEN", path: "/repos/acme/flock-audit", env: "GH_TOKEN=ghp_PLACEHOLDER"}
	rest := want{secret: "rest", v: "REST_KEY", path: "/flock-audit", env: "REST_KEY=rest-PLACEHOLDER", rulesRefuse: true}
	git := want{secret: "git", path: "/flock-audit"}
	at := func(w want, name, addr, host string) want { w.name, w.addr, w.host = name, addr, host; return w }
	for _, tc := range []struct {
		id   int
		want []want
	}{
		{1, []want{at(gh, "send secret github's placeholder to another name on api.github.com:443's connection", "api.github.com:443", elsewhereName)}},
		{2, []want{
			at(gh, "send secret github's placeholder to another name on api.github.com:443's connection", "api.github.com:443", elsewhereName),
			at(gh, "send secret github's placeholder to rest.example:443", "rest.example:443", "rest.example"),
			at(rest, "send secret rest's placeholder to another name on rest.example:443's connection", "rest.example:443", elsewhereName),
			at(rest, "send secret rest's placeholder to api.github.com:443", "api.github.com:443", "api.github.com"),
		}},
		{3, []want{
			at(git, "have secret git injected in a request to another name on github.com:443's connection", "github.com:443", elsewhereName),
			at(rest, "send secret rest's placeholder to another name on rest.example:443's connection", "rest.example:443", elsewhereName),
			at(rest, "send secret rest's placeholder to github.com:443", "github.com:443", "github.com"),
		}},
		{4, nil},
	} {
		a, _ := f.Agent(tc.id)
		var got []Probe
		for _, p := range Plan(f, a, Target{Placeholders: phs}, Colluder{}) {
			if p.Req.Op == "secret-elsewhere" {
				got = append(got, p)
			}
		}
		if len(got) != len(tc.want) {
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			t.Errorf("agent %d: probes %q; want %d", tc.id, names, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			p, home := got[i], strings.SplitN(w.addr, ":", 2)[0]
			if w.host != elsewhereName && w.host != home {
				t.Fatalf("the test's own want %+v", w)
			}
			req, c := p.Req, p.Control
			if b, _ := json.Marshal(req); p.Name != w.name || req.Addr != w.addr || req.Key != 0 || len(req.Env) > 0 ||
				*req.Send != (probe.Send{Host: w.host, Path: w.path, Var: w.v, Inject: req.Send.Inject}) || strings.Contains(string(b), "PLACEHOLDER") {
				t.Errorf("agent %d: probe %q: %s; want %+v", tc.id, p.Name, b, w)
			}
			// The control: where the secret is bound, addressed to it.
			s, _ := f.Secret(w.secret)
			env := []string{"HTTPS_PROXY=http://" + spec.DefaultProxyListen}
			if w.env != "" {
				env = append(env, w.env)
			}
			if b, _ := json.Marshal(c); c.Addr != s.Hosts[0] || c.Key != int(f.UID(tc.id)) || !slices.Equal(c.Env, env) ||
				*c.Send != (probe.Send{Host: strings.SplitN(s.Hosts[0], ":", 2)[0], Path: w.path, Var: w.v, Inject: s.Inject, RulesRefuse: w.rulesRefuse}) {
				t.Errorf("agent %d: the control of %q: %s", tc.id, p.Name, b)
			}
			if req.Send == c.Send {
				t.Errorf("agent %d: %q shares its Send with its control", tc.id, p.Name)
			}
		}
	}
}
