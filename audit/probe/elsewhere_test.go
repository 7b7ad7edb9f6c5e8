package probe

// Unit tier: a real flock-proxy (package proxy) on loopback, intercepting
// for one agent, real TLS, a test CA standing in for the system's roots
// and a stand-in upstream for every name.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

const (
	apiSecret = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
	gitSecret = "ghp_Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A"
)

// oneUID is the kernel where every client is the agent's uid.
type oneUID uint32

func (u oneUID) UID(_, _ netip.AddrPort) (uint32, error) { return uint32(u), nil }

// tableDNS resolves from a table.
type tableDNS map[string]netip.Addr

func (d tableDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// seen is what reached the stand-in upstream.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) last() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return nil
	}
	return s.reqs[len(s.reqs)-1]
}

// elsewhereProxy runs flock-proxy for agent 1, granted secret api (on
// api.example.com, held in API_KEY, GET under /v1 alone) and
// git (on git.example.com, injected in Basic auth); plain.example.com is
// in its egress and no secret's. It answers the environment a probe
// reads (HTTPS_PROXY, API_KEY) and what reached the upstream, which
// answers 404 to everything.
func elsewhereProxy(t *testing.T) ([]string, *seen) {
	flockCA, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	upstreamCA, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	got := &seen{}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.mu.Lock()
		got.reqs = append(got.reqs, r)
		got.mu.Unlock()
		http.Error(w, "no such page for "+r.Header.Get("Authorization"), http.StatusNotFound)
	}))
	up.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return upstreamCA.Leaf(h.ServerName) }}
	up.StartTLS()
	t.Cleanup(up.Close)
	roots := x509.NewCertPool()
	roots.AddCert(upstreamCA.Certificate())

	var egress []spec.Egress
	for _, e := range []string{"api.example.com:443", "git.example.com:443", "plain.example.com:443"} {
		r, err := spec.ParseEgress(e)
		if err != nil {
			t.Fatal(err)
		}
		egress = append(egress, r)
	}
	public := netip.MustParseAddr("192.0.2.10")
	srv := &proxy.Server{UIDs: oneUID(1001), Timeout: 5 * time.Second, Roots: roots,
		Resolver: tableDNS{"api.example.com": public, "git.example.com": public, "plain.example.com": public},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, up.Listener.Addr().String())
		}}
	srv.SetPolicy(proxy.Policy{Agents: map[uint32]proxy.AgentRules{1001: {ID: 1, Rules: egress}}})
	api := spec.Secret{Name: "api", Hosts: []string{"api.example.com:443"}, Env: []string{"API_KEY"},
		Rules: spec.SecretRules{Allow: []spec.RequestRule{{Methods: []string{"GET"}, Path: "/v1"}}}}
	git := spec.Secret{Name: "git", Hosts: []string{"git.example.com:443"}, Inject: spec.Inject{BasicUser: "x-access-token"}}
	apiPH := secrets.Placeholder([]byte(apiSecret), rand.Reader)
	srv.SetIntercept(proxy.Intercept{CA: flockCA, Agents: map[uint32]secrets.Bindings{1001: {
		secrets.Bind(api, []byte(apiSecret), apiPH),
		secrets.Bind(git, []byte(gitSecret), secrets.Placeholder([]byte(gitSecret), rand.Reader)),
	}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return []string{"HTTPS_PROXY=http://" + ln.Addr().String(), "API_KEY=" + apiPH}, got
}

// A placeholder toward another name on its host's connection, or toward
// another secret's host, meets flock-proxy's refusal and is no escape;
// the controls' requests, where the secret is bound, are carried with the
// secret swapped in or injected; a request flock-proxy does not refuse
// (a tunnel it does not intercept) is carried, the escape; a CONNECT
// refused or a variable missing are no escape, and say so.
func TestSecretElsewhere(t *testing.T) {
	env, got := elsewhereProxy(t)
	get := func(host, path, v string) *Send { return &Send{Host: host, Path: path, Var: v} }
	for _, tc := range []struct {
		name      string
		addr      string
		send      *Send
		ok        bool
		want      string // in the detail, or the error
		notSent   bool
		upstream  func(*http.Request) bool // what reached it, when carried
		reachedUp bool
	}{
		{name: "another name on the secret's host", addr: "api.example.com:443", send: get("flock-audit.invalid", "/v1/flock-audit", "API_KEY"),
			want: "421 Misdirected Request: flock proxy: agent 1: refused: a request for flock-audit.invalid on a connection to api.example.com:443"},
		{name: "another secret's host", addr: "git.example.com:443", send: get("git.example.com", "/flock-audit", "API_KEY"),
			want: "403 Forbidden: flock proxy: agent 1: refused: secret api is not bound to git.example.com:443"},
		{name: "the control: its own host", addr: "api.example.com:443", send: get("api.example.com", "/v1/flock-audit", "API_KEY"),
			ok: true, want: "carried upstream: 404 Not Found", reachedUp: true,
			upstream: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+apiSecret }},
		{name: "the control of a secret injected", addr: "git.example.com:443", send: get("git.example.com", "/flock-audit", ""),
			ok: true, want: "carried upstream: 404 Not Found", reachedUp: true,
			upstream: func(r *http.Request) bool { u, p, _ := r.BasicAuth(); return u == "x-access-token" && p == gitSecret }},
		{name: "outside the secret's rules", addr: "api.example.com:443", send: get("api.example.com", "/flock-audit", "API_KEY"),
			want: "403 Forbidden: flock proxy: agent 1: refused: secret api may not be sent in GET /flock-audit"},
		{name: "outside the rules, for a control that may be judged by them", addr: "api.example.com:443",
			send: &Send{Host: "api.example.com", Path: "/flock-audit", Var: "API_KEY", RulesRefuse: true},
			ok:   true, want: "judged by the secret's rules: 403 Forbidden: flock proxy: agent 1: refused: secret api may not"},
		{name: "judged by the rules is no pass for an unbound host", addr: "git.example.com:443",
			send: &Send{Host: "git.example.com", Path: "/flock-audit", Var: "API_KEY", RulesRefuse: true},
			want: "secret api is not bound to git.example.com:443"},
		{name: "a tunnel not intercepted carries it", addr: "plain.example.com:443", send: get("flock-audit.invalid", "/flock-audit", "API_KEY"),
			ok: true, want: "carried upstream: 404 Not Found", reachedUp: true,
			upstream: func(r *http.Request) bool { return r.Host == "flock-audit.invalid" }},
		{name: "a CONNECT refused", addr: "other.example.com:443", send: get("flock-audit.invalid", "/flock-audit", "API_KEY"),
			want: "CONNECT other.example.com:443 refused, so the placeholder went nowhere: 403"},
		{name: "no placeholder to send", addr: "api.example.com:443", send: get("flock-audit.invalid", "/flock-audit", "NO_SUCH_VAR"),
			want: "no NO_SUCH_VAR in the environment", notSent: true},
	} {
		before := got.last()
		r := Run(Request{Op: "secret-elsewhere", Addr: tc.addr, Send: tc.send, Env: env}, 10*time.Second)
		text := r.Detail + r.Err
		if ph := strings.TrimPrefix(env[1], "API_KEY="); strings.Contains(text, ph) || strings.Contains(text, apiSecret) {
			t.Errorf("%s: %q tells the placeholder", tc.name, text)
		}
		if r.OK != tc.ok || !strings.Contains(text, tc.want) || r.TimedOut != tc.notSent {
			t.Errorf("%s: %+v; want ok %v, %q, not sent %v", tc.name, r, tc.ok, tc.want, tc.notSent)
		}
		after := got.last()
		switch {
		case tc.reachedUp && (after == before || !tc.upstream(after)):
			t.Errorf("%s: the upstream saw %+v", tc.name, after)
		case !tc.reachedUp && after != before:
			t.Errorf("%s: refused, yet the upstream saw %+v", tc.name, after)
		}
	}
}
