package spec

// Tier: unit (no root; the owner check runs as root only).

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const secretsSpec = `
secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["API.github.com:443", "github.com:443"]
    inject: {basic: {user: x-access-token}}
    env: [GH_TOKEN, GITHUB_TOKEN]
    rules:
      allow: [{methods: [GET, POST], path: /repos/acme/}, {path: /user}]
      deny: [{methods: [DELETE]}, {path: /repos/acme/secret}]
  - {name: search, file: /etc/flock/secrets/search, hosts: ["api.search.example:8443"], inject: {query: key}}
  - {name: bearer, file: /etc/flock/secrets/b, hosts: ["b.example:443"], inject: {header: authorization, prefix: "Bearer "}}
defaults:
  secrets: [search]
  egress: ["api.search.example:8443"]
agents:
  - id: 1
    egress: ["api.github.com:443", "github.com:443", "b.example:443"]
    secrets: [github, bearer]
  - id: 2
  - id: 3
    secrets: []
`

func TestSecretsAndGrantsAreRead(t *testing.T) {
	f, err := Parse([]byte(secretsSpec))
	if err != nil {
		t.Fatal(err)
	}
	want := []Secret{
		{Name: "github", File: "/etc/flock/secrets/github", Hosts: []string{"api.github.com:443", "github.com:443"},
			Inject: Inject{BasicUser: "x-access-token"}, Env: []string{"GH_TOKEN", "GITHUB_TOKEN"},
			Rules: SecretRules{
				Allow: []RequestRule{{Methods: []string{"GET", "POST"}, Path: "/repos/acme"}, {Path: "/user"}},
				Deny:  []RequestRule{{Methods: []string{"DELETE"}, Path: "/"}, {Path: "/repos/acme/secret"}},
			}},
		{Name: "search", File: "/etc/flock/secrets/search", Hosts: []string{"api.search.example:8443"}, Inject: Inject{Query: "key"}},
		{Name: "bearer", File: "/etc/flock/secrets/b", Hosts: []string{"b.example:443"}, Inject: Inject{Header: "Authorization", Prefix: "Bearer "}},
	}
	if !reflect.DeepEqual(f.Secrets, want) {
		t.Errorf("secrets:\n got %+v\nwant %+v", f.Secrets, want)
	}
	for id, grants := range map[int][]string{1: {"github", "bearer"}, 2: {"search"}, 3: nil} {
		if a, _ := f.Agent(id); !slices.Equal(a.Secrets, grants) || a.HasSecrets() != (grants != nil) {
			t.Errorf("agent %d's secrets %q, want %q (its own replace the defaults')", id, a.Secrets, grants)
		}
	}
}

// What a spec's secrets and grants are refused for, each naming the
// field and the fix; the bad-spec corpus (testdata/bad/secrets-*) holds
// whole specs with their exact messages.
func TestSecretsRefused(t *testing.T) {
	const base = "secrets:\n  - {name: gh, file: /etc/flock/secrets/gh, hosts: [\"api.github.com:443\"], env: [GH_TOKEN]}\n"
	for _, tc := range []struct{ name, spec, want string }{
		{"an address", `secrets: [{name: x, file: /etc/x, hosts: ["10.1.2.3:443"], env: [X]}]`, `secrets[0].hosts[0]: "10.1.2.3:443" is an address; flock-proxy swaps a secret in only over TLS it terminates by name`},
		{"a wildcard", `secrets: [{name: x, file: /etc/x, hosts: ["api.x.example:443", "*.x.example:443"], env: [X]}]`, `secrets[0].hosts[1]: "*.x.example:443" is a wildcard`},
		{"no port", `secrets: [{name: x, file: /etc/x, hosts: ["api.x.example"], env: [X]}]`, `secrets[0].hosts[0]: "api.x.example" is not a host name with its port`},
		{"plain HTTP", `secrets: [{name: x, file: /etc/x, hosts: ["api.x.example:80"], env: [X]}]`, `is plain HTTP (port 80)`},
		{"no hosts", `secrets: [{name: x, file: /etc/x, hosts: [], env: [X]}]`, `secrets[0].hosts: is empty`},
		{"neither env nor inject", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"]}]`, `secrets[0]: has neither env nor inject`},
		{"a file in the root", `secrets: [{name: x, file: /srv/flock/common/x, hosts: ["a.example:443"], env: [X]}]`, `secrets[0].file: "/srv/flock/common/x" is inside the flock's root`},
		{"two injects", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], inject: {header: X-Key, query: key}}]`, `secrets[0].inject: gives 2 of header, basic and query`},
		{"a framing header", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], inject: {header: content-length}}]`, `secrets[0].inject.header: Content-Length frames the request`},
		{"a prefix alone", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], inject: {query: k, prefix: "Bearer "}}]`, `secrets[0].inject.prefix: is for a header`},
		{"a user with a colon", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], inject: {basic: {user: "a:b"}}}]`, `secrets[0].inject.basic.user: "a:b" is not a Basic auth user name`},
		{"flock's variable", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], env: [GH_TOKEN, HTTPS_PROXY]}]`, `secrets[0].env[1]: flock sets HTTPS_PROXY itself`},
		{"a CA variable", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], env: [SSL_CERT_FILE]}]`, `secrets[0].env[0]: flock sets SSL_CERT_FILE itself for agents granted secrets`},
		{"a method", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], env: [X], rules: {allow: [{methods: [get]}]}}]`, `secrets[0].rules.allow[0].methods[0]: "get" is not a method a rule names; choose GET, HEAD`},
		{"a path not clean", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], env: [X], rules: {deny: [{path: /repos/acme/../x}]}}]`, `secrets[0].rules.deny[0].path: "/repos/acme/../x" is not a clean path (a request's path is cleaned before it is compared); write /repos/x`},
		{"a relative path", `secrets: [{name: x, file: /etc/x, hosts: ["a.example:443"], env: [X], rules: {deny: [{path: repos}]}}]`, `secrets[0].rules.deny[0].path: "repos" does not start with /`},
		{"an unknown grant", base + `agents: [{id: 1, egress: ["api.github.com:443"], secrets: [gh, gitlab]}]`, `agents[0].secrets[1]: "gitlab" is not one of the secrets; choose gh, or add it to secrets`},
		{"a grant without secrets", `agents: [{id: 1, secrets: [gh]}]`, `agents[0].secrets[0]: "gh" names a secret, but the spec lists none`},
		{"a grant twice", base + `agents: [{id: 1, egress: ["api.github.com:443"], secrets: [gh, gh]}]`, `agents[0].secrets[1]: "gh" is listed twice`},
		{"a grant the egress does not reach", base + `agents: [{id: 1, secrets: [gh]}]`, `agents[0].secrets[0]: secret gh is bound to api.github.com:443, which the agent's egress does not allow; add "api.github.com:443" to its egress`},
		{"env sets its variable", base + `agents: [{id: 1, egress: ["api.github.com:443"], secrets: [gh], env: {GH_TOKEN: ghp_x}}]`, `agents[0].env.GH_TOKEN: flock sets GH_TOKEN itself for the grant of secret gh`},
		{"env sets a CA variable", base + `agents: [{id: 1, egress: ["api.github.com:443"], secrets: [gh], env: {NODE_EXTRA_CA_CERTS: /x.pem}}]`, `agents[0].env.NODE_EXTRA_CA_CERTS: flock sets NODE_EXTRA_CA_CERTS itself for the agents granted secrets`},
		{"two secrets, one variable", base + `  - {name: gh2, file: /etc/flock/secrets/gh2, hosts: ["api.github.com:443"], env: [GH_TOKEN]}
agents: [{id: 1, egress: ["api.github.com:443"], secrets: [gh, gh2]}]`, `agents[0].secrets[1]: secret gh2's variable GH_TOKEN is also set for secret gh`},
		{"a model grant's variable", base + `  - {name: oa, file: /etc/x, hosts: ["a.example:443"], env: [OPENAI_API_KEY]}
providers: [{name: o, kind: openai, url: "https://api.openai.com/v1"}]
agents: [{id: 1, egress: ["a.example:443"], models: {o: {}}, secrets: [oa]}]`, `agents[0].secrets[0]: secret oa's variable OPENAI_API_KEY is also set for the grant of provider o`},
	} {
		_, err := Parse([]byte(tc.spec + withAgents(tc.spec)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to say %q", tc.name, err, tc.want)
		}
	}
}

// withAgents is what a spec without agents needs to be read whole.
func withAgents(spec string) string {
	if strings.Contains(spec, "agents:") {
		return ""
	}
	return "\nagents: [{id: 1}]\n"
}

// Every field set: a field added to Secret is zero here, and fails this
// test, until the fixture sets it; the round trip then fails until the
// codec carries it.
var fullSecret = Secret{Name: "gh", File: "/etc/flock/secrets/gh", Hosts: []string{"api.github.com:443", "uploads.github.com:443"},
	Inject: Inject{Header: "Authorization", Prefix: "token "}, Env: []string{"GH_TOKEN"},
	Rules: SecretRules{Allow: []RequestRule{{Methods: []string{"GET"}, Path: "/repos/acme"}}, Deny: []RequestRule{{Path: "/"}}}}

func TestSecretCodecRoundTrips(t *testing.T) {
	r := reflect.ValueOf(fullSecret)
	for i := range r.NumField() {
		if r.Field(i).IsZero() {
			t.Errorf("the fixture's Secret.%s is zero; set it, and carry it in the codec", r.Type().Field(i).Name)
		}
	}
	secrets := []Secret{fullSecret,
		{Name: "basic", File: "/etc/b", Hosts: []string{"git.example:443"}, Inject: Inject{BasicUser: "x-access-token"}},
		{Name: "query", File: "/etc/q", Hosts: []string{"q.example:8443"}, Inject: Inject{Query: "key"}, Env: []string{"Q_KEY"}}}
	grants := []string{"query", "gh"}
	sb, err := EncodeSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := EncodeSecretGrants(grants)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSecrets(sb, "secrets")
	if err != nil {
		t.Fatalf("%s: %v", sb, err)
	}
	backG, err := DecodeSecretGrants(gb, "secrets", back)
	if err != nil {
		t.Fatalf("%s: %v", gb, err)
	}
	if !reflect.DeepEqual(back, secrets) || !slices.Equal(backG, grants) {
		t.Errorf("read back:\n%+v %q\nwant\n%+v %q", back, backG, secrets, grants)
	}
	// The spec's own shape: every field it accepts is written, and the
	// encoding reads as a spec.
	var ss []map[string]json.RawMessage
	if err := json.Unmarshal(sb, &ss); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(ss[0])); !reflect.DeepEqual(got, slices.Sorted(slices.Values(secretKeys))) {
		t.Errorf("a secret's keys %v, want the spec's %v", got, secretKeys)
	}
	f, err := Parse([]byte(fmt.Sprintf("secrets: %s\nagents: [{id: 1, egress: [\"api.github.com:443\", \"uploads.github.com:443\", \"q.example:8443\"], secrets: %s}]\n", sb, gb)))
	if err != nil {
		t.Fatalf("the encoding is not a spec's: %v\n%s", err, sb)
	}
	if !reflect.DeepEqual(f.Secrets, secrets) || !slices.Equal(f.Agents[0].Secrets, grants) {
		t.Errorf("the spec read %+v %q", f.Secrets, f.Agents[0].Secrets)
	}
	for _, tc := range []struct{ name, secrets, grants, want string }{
		{"an address", `[{"name": "x", "file": "/etc/x", "hosts": ["192.0.2.1:443"], "env": ["X"]}]`, "", `secrets[0].hosts[0]: "192.0.2.1:443" is an address`},
		{"an unknown grant", "", `["gh", "nope"]`, `secrets[1]: "nope" is not one of the secrets; choose basic, gh or query`},
	} {
		if tc.secrets != "" {
			_, err = DecodeSecrets([]byte(tc.secrets), "secrets")
		} else {
			_, err = DecodeSecretGrants([]byte(tc.grants), "secrets", secrets)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The files of the secrets granted, as this host has them: what
// provision refuses before it changes anything.
func TestSecretFileProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string { return writeMode(t, dir, name, body, mode) }
	readable := write("readable", "ghp_x\n", 0o644)
	f := &Flock{Secrets: []Secret{
		{Name: "good", File: write("good", "ghp_x\n", 0o600)},
		{Name: "missing", File: filepath.Join(dir, "nope")},
		{Name: "readable", File: readable},
		{Name: "group", File: write("group", "ghp_x\n", 0o640)},
		{Name: "empty", File: write("empty", "", 0o400)},
		{Name: "dir", File: dir},
		{Name: "not-granted", File: readable},
	}}
	var agent Agent
	for _, s := range f.Secrets[:len(f.Secrets)-1] {
		agent.Secrets = append(agent.Secrets, s.Name)
	}
	got := map[string]string{}
	for _, e := range f.SecretFileProblems(FileCheck{Stat: os.Stat, ReadFile: os.ReadFile}, []Agent{agent}) {
		got[e.Path] = e.Msg
	}
	want := map[string]string{
		"secrets[1].file": "no such file or directory; write the secret there, readable by root alone",
		"secrets[2].file": "readable or writable by others (mode 0644), and any user of this host could copy the secret; chmod 600 " + readable,
		"secrets[3].file": "(mode 0640)",
		"secrets[4].file": "is empty; write the secret in it",
		"secrets[5].file": "is not a regular file",
	}
	if os.Getuid() != 0 {
		for _, i := range []string{"0", "2", "3", "4"} {
			want["secrets["+i+"].file"] = "is owned by uid"
		}
	}
	for path, w := range want {
		if !strings.Contains(got[path], w) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want exactly %v", got, want)
	}
}
