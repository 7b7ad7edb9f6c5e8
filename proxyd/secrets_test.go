package proxyd

// Unit tier.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
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

// writeCA makes the flock's CA and hands it to the proxy as a credential.
func (r *rig) writeCA() *secrets.CA {
	r.t.Helper()
	ca, err := secrets.NewCA()
	if err != nil {
		r.t.Fatal(err)
	}
	cert, key, err := ca.PEM()
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(filepath.Join(r.o.CredentialsDir, spec.SecretsCACredential), append(cert, key...))
	return ca
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
	r.writeCA()
	r.write(filepath.Join(dir, spec.SecretCredential("github")), []byte("ghp_real\n"))
	if _, err := Start(r.o); err == nil || !strings.Contains(err.Error(), "secret search (credential secret-search, from /etc/flock/secrets/search)") {
		t.Fatalf("started without secret search: %v", err)
	}
	r.write(filepath.Join(dir, spec.SecretCredential("search")), []byte("se-real"))

	var warned []string
	ic, err := loadIntercept(credentials{dir: dir}, c, func(f string, _ ...any) { warned = append(warned, f) })
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
	if _, err := loadIntercept(credentials{dir: dir}, c, func(f string, _ ...any) { warned = append(warned, f) }); err != nil || len(warned) != 1 || !strings.Contains(warned[0], "not the secret's length") {
		t.Errorf("a placeholder of another length: %v, warned %v", err, warned)
	}
}

// An agent granted a secret and no model API has its report from the
// start, with nothing counted; a request that carries the secret and one
// its rules refuse reach the bus in its next reports, counted by secret
// and reason. The upstream is on loopback, as api.github.com.
func TestServicePublishesSecretCounts(t *testing.T) {
	r := newRig(t)
	const value = "ghp_real_0123456789"
	g := r.githubSecret(func() string { return value }, value, r.busURL)
	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r.report("agent 1, granted a secret alone, at the start", func(rep wire.ModelReport) bool { return len(rep.Secrets) == 0 })

	for _, tc := range []struct {
		path   string
		status int
	}{{"/v1/user", http.StatusOK}, {"/v2/user", http.StatusForbidden}} {
		if got := g.get(s, tc.path); got != tc.status {
			t.Fatalf("GET %s: %d, want %d", tc.path, got, tc.status)
		}
	}
	want := wire.SecretUse{Requests: 1, Refused: map[string]uint64{proxy.ReasonSecretRule: 1}}
	r.report("the secret's request and refusal counted", func(rep wire.ModelReport) bool {
		return len(rep.Secrets) == 1 && reflect.DeepEqual(rep.Secrets["github"], want)
	})
}

// githubRig is an upstream as api.github.com on loopback that answers
// the bearer of its secret alone, and the proxy's config granting agent
// 1 the secret github there (GET /v1 alone).
type githubRig struct {
	t       *testing.T
	host    string // api.github.com:PORT
	ph      string // agent 1's placeholder
	flockCA *secrets.CA
	config  proxy.Config
}

// githubSecret sets r up for the secret github, value its credential,
// the upstream answering the bearer of secret(); bus is the config's.
func (r *rig) githubSecret(secret func() string, value, bus string) githubRig {
	t := r.t
	upstreamCA, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+secret() {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	}))
	upstream.TLS = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return upstreamCA.Leaf("api.github.com") }}
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	r.o.roots = x509.NewCertPool()
	r.o.roots.AddCert(upstreamCA.Certificate())
	r.o.resolver = loopbackDNS{}
	port := upstream.URL[strings.LastIndex(upstream.URL, ":")+1:]
	g := githubRig{t: t, host: "api.github.com:" + port, flockCA: r.writeCA(), ph: secrets.Placeholder([]byte(value), rand.Reader)}
	r.write(filepath.Join(r.o.CredentialsDir, spec.SecretCredential("github")), []byte(value))
	var egress []spec.Egress
	// The name, and its address on loopback.
	for _, e := range []string{g.host, "127.0.0.1:" + port} {
		rule, err := spec.ParseEgress(e)
		if err != nil {
			t.Fatal(err)
		}
		egress = append(egress, rule)
	}
	g.config = proxy.Config{Listen: "127.0.0.1:0", Bus: bus,
		Policy: proxy.Policy{Agents: map[uint32]proxy.AgentRules{r.uid: {ID: 1, Rules: egress}}},
		Secrets: []spec.Secret{{Name: "github", File: "/etc/flock/secrets/github", Hosts: []string{g.host}, Env: []string{"GH_TOKEN"},
			Rules: spec.SecretRules{Allow: []spec.RequestRule{{Methods: []string{"GET"}, Path: "/v1"}}}}},
		Placeholders: map[uint32]map[string]string{r.uid: {"github": g.ph}},
	}
	b, err := g.config.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r.write(r.o.ConfigPath, b)
	return g
}

// get is the status of GET path on a new connection through s, with
// agent 1's placeholder.
func (g githubRig) get(s *Service, path string) int {
	g.t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(g.flockCA.Certificate())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: s.Addr().String()}), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest("GET", "https://"+g.host+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.ph)
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// loopbackDNS resolves every name to 127.0.0.1.
type loopbackDNS struct{}

func (loopbackDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}
