package proxyd

// Unit tier.

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// secretsConfig writes a config granting the test's uid (agent 1) the
// secrets github and search, in that order of the spec's, and agent 2
// search alone.
func (r *rig) secretsConfig() proxy.Config {
	r.t.Helper()
	egress, err := spec.ParseEgress("api.github.com:443")
	if err != nil {
		r.t.Fatal(err)
	}
	search, err := spec.ParseEgress("api.search.example:443")
	if err != nil {
		r.t.Fatal(err)
	}
	c := proxy.Config{Listen: "127.0.0.1:0",
		Policy: proxy.Policy{Agents: map[uint32]proxy.AgentRules{r.uid: {ID: 1, Rules: []spec.Egress{egress, search}}, r.uid + 1: {ID: 2, Rules: []spec.Egress{search}}}},
		Secrets: []spec.Secret{
			{Name: "github", File: "/etc/flock/secrets/github", Hosts: []string{"api.github.com:443"}, Env: []string{"GH_TOKEN"}},
			{Name: "search", File: "/etc/flock/secrets/search", Hosts: []string{"api.search.example:443"}, Inject: spec.Inject{Query: "key"}},
		},
		Placeholders: map[uint32]map[string]string{r.uid: {"search": "se-0000", "github": "ghp_0000"}, r.uid + 1: {"search": "se-1111"}},
	}
	b, err := c.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(r.o.ConfigPath, b)
	return c
}

// The proxy reads each granted secret and the CA from its credentials
// and binds each agent's grants in the spec's order; a credential
// missing is a start error (and a reload's, the previous policy kept)
// naming it and the fix.
func TestServiceLoadsTheSecrets(t *testing.T) {
	r := newRig(t)
	c := r.secretsConfig()
	dir := r.o.CredentialsDir
	if _, err := Start(r.o); err == nil || !strings.Contains(err.Error(), "credential secrets-ca") || !strings.Contains(err.Error(), "systemctl restart flock-proxy.service") {
		t.Fatalf("started without the CA: %v", err)
	}
	ca, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	r.write(filepath.Join(dir, spec.SecretsCACredential), append(cert, key...))
	r.write(filepath.Join(dir, spec.SecretCredential("github")), []byte("ghp_real\n"))
	if _, err := Start(r.o); err == nil || !strings.Contains(err.Error(), "secret search (credential secret-search, from /etc/flock/secrets/search)") {
		t.Fatalf("started without secret search: %v", err)
	}
	r.write(filepath.Join(dir, spec.SecretCredential("search")), []byte("se-real"))

	var warned []string
	ic, err := loadIntercept(dir, c, func(f string, _ ...any) { warned = append(warned, f) })
	if err != nil {
		t.Fatal(err)
	}
	one, two := ic.Agents[r.uid], ic.Agents[r.uid+1]
	if ic.CA == nil || len(one) != 2 || one[0].Name != "github" || string(one[0].Secret) != "ghp_real" || one[0].Placeholder != "ghp_0000" ||
		one[1].Name != "search" || !one[1].Hosts["api.search.example:443"] || len(two) != 1 || two[0].Placeholder != "se-1111" {
		t.Errorf("bindings %+v and %+v", one, two)
	}
	if len(warned) != 0 {
		t.Errorf("warned %v", warned)
	}

	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A secret granted since the start, whose credential the unit lacks.
	c.Secrets = append(c.Secrets, spec.Secret{Name: "new", File: "/etc/flock/secrets/new", Hosts: []string{"api.search.example:443"}, Env: []string{"NEW"}})
	c.Placeholders[r.uid]["new"] = "n-0"
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r.write(r.o.ConfigPath, b)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "credential secret-new") || !strings.Contains(err.Error(), "the previous policy stays") {
		t.Errorf("reloading with a secret the unit lacks: %v", err)
	}
	r.write(filepath.Join(dir, spec.SecretCredential("new")), []byte("longer than n-0"))
	if _, err := loadIntercept(dir, c, func(f string, _ ...any) { warned = append(warned, f) }); err != nil || len(warned) != 1 || !strings.Contains(warned[0], "not the secret's length") {
		t.Errorf("a placeholder of another length: %v, warned %v", err, warned)
	}
}
