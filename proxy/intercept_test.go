package proxy

// Unit tier: a real proxy, real TLS on loopback, a test CA standing in
// for the system's roots (Server.Roots) and a stand-in upstream.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

const (
	apiSecret    = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
	gitSecret    = "ghp_Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A"
	agentUID     = 1001 // granted both secrets
	ungrantedUID = 1002 // granted none, same egress
)

// secretRig is a proxy intercepting for agent 1 (uid 1001), whose dials
// all land on one stand-in upstream serving every name with a leaf of
// upstreamCA, the "system's roots".
type secretRig struct {
	addr                string
	srv                 *Server
	uids                *fakeUIDs
	flockCA, upstreamCA *secrets.CA
	apiPH, gitPH        string
	api, git            spec.Secret // the secrets of agent 1's bindings
	upstream            *httptest.Server
	mu                  sync.Mutex
	seen                []*http.Request // what reached the upstream
	records             []Record
	streamGo            chan struct{} // the upstream's stream goes on
}

var secretDNS = fakeDNS{"api.example.com": {public}, "git.example.com": {public}, "plain.example.com": {public}}

func newSecretRig(t testing.TB) *secretRig { return newSecretRigOf(t, true) }

// newSecretRigOf is newSecretRig with an upstream that offers HTTP/2 or
// not, and the rig changed by opts before its proxy serves.
func newSecretRigOf(t testing.TB, h2 bool, opts ...func(*secretRig)) *secretRig {
	r := &secretRig{uids: &fakeUIDs{uid: agentUID}, streamGo: make(chan struct{})}
	var err error
	if r.flockCA, err = secrets.NewCA(); err != nil {
		t.Fatal(err)
	}
	if r.upstreamCA, err = secrets.NewCA(); err != nil {
		t.Fatal(err)
	}
	api := spec.Secret{Name: "api", Hosts: []string{"api.example.com:443"}, Env: []string{"API_KEY"},
		Rules: spec.SecretRules{Allow: []spec.RequestRule{{Methods: []string{"GET", "POST"}, Path: "/v1"}}, Deny: []spec.RequestRule{{Methods: []string{"DELETE"}, Path: "/"}}}}
	git := spec.Secret{Name: "git", Hosts: []string{"git.example.com:443"}, Inject: spec.Inject{BasicUser: "x-access-token"}}
	r.apiPH, r.gitPH = secrets.Placeholder([]byte(apiSecret), rand.Reader), secrets.Placeholder([]byte(gitSecret), rand.Reader)
	r.api, r.git = api, git

	r.upstream = httptest.NewUnstartedServer(http.HandlerFunc(r.serveUpstream))
	r.upstream.EnableHTTP2 = h2
	r.upstream.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return r.upstreamCA.Leaf(h.ServerName) }}
	r.upstream.StartTLS()
	t.Cleanup(r.upstream.Close)

	roots := x509.NewCertPool()
	roots.AddCert(r.upstreamCA.Certificate())
	egress := rules(t, "api.example.com:443", "git.example.com:443", "plain.example.com:443")
	r.srv = &Server{UIDs: r.uids, Resolver: secretDNS, Timeout: time.Second, Roots: roots,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.upstream.Listener.Addr().String())
		},
		Record: func(rec Record) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.records = append(r.records, rec)
		}}
	r.srv.SetPolicy(Policy{Agents: map[uint32]AgentRules{agentUID: {ID: 1, Rules: egress}, ungrantedUID: {ID: 2, Rules: egress}}})
	r.srv.SetIntercept(Intercept{CA: r.flockCA, Agents: map[uint32]secrets.Bindings{
		agentUID: {secrets.Bind(api, []byte(apiSecret), r.apiPH), secrets.Bind(git, []byte(gitSecret), r.gitPH)},
	}})
	for _, o := range opts {
		o(r)
	}
	r.addr = serve(t, r.srv)
	return r
}

// serveUpstream is the stand-in API: it answers 200 "ok" to a request
// carrying its secret where it expects it, else 401; /echo echoes the
// credential in a header and in a streamed body.
func (r *secretRig) serveUpstream(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	ok := false
	switch host, _, _ := strings.Cut(req.Host, ":"); {
	case strings.HasPrefix(req.URL.Path, "/v1/query"):
		ok = req.URL.Query().Get("key") == apiSecret
	case strings.HasPrefix(req.URL.Path, "/v1/echo"):
		auth := req.Header.Get("Authorization")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", auth)
		w.(http.Flusher).Flush()
		<-r.streamGo
		fmt.Fprintf(w, "data: again %s\n\n", auth)
		return
	case strings.Contains(req.URL.Path, "/big/"):
		n := 0
		_, size, _ := strings.Cut(req.URL.Path, "/big/")
		fmt.Sscanf(size, "%d", &n)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		io.Copy(w, io.LimitReader(zeros{}, int64(n)))
		return
	case host == "git.example.com":
		user, pass, _ := req.BasicAuth()
		ok = user == "x-access-token" && pass == gitSecret
	case host == "plain.example.com":
		ok = true
	default:
		ok = req.Header.Get("Authorization") == "Bearer "+apiSecret
	}
	if !ok {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "ok")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// client is an agent's HTTP client through the proxy, trusting the CAs
// given (the flock's and the "system's" in its bundle), HTTP/2 or not.
func (r *secretRig) client(h2 bool, trust ...*secrets.CA) *http.Client {
	pool := x509.NewCertPool()
	for _, ca := range trust {
		pool.AddCert(ca.Certificate())
	}
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr}),
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}
}

func (r *secretRig) seenCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// do sends one request and reads its answer whole.
func do(c *http.Client, method, u string, h http.Header) (int, string, http.Header, int, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return 0, "", nil, 0, err
	}
	for k, vs := range h {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, resp.ProtoMajor, err
}

// An agent granted a secret reaches its hosts with its placeholder
// swapped, in a header, in Basic auth and in the query, or the secret
// injected where the spec says, over HTTP/1.1 and HTTP/2; requests
// outside the rules, or carrying a placeholder toward a host its secret
// is not bound to, are refused with a 403 that says why and never
// reach the upstream.
func TestInterceptSwapsAndRefuses(t *testing.T) {
	r := newSecretRig(t)
	basic := func(user, pass string) http.Header {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return req.Header
	}
	for _, h2 := range []bool{false, true} {
		c := r.client(h2, r.flockCA, r.upstreamCA)
		for _, tc := range []struct {
			name, method, url string
			h                 http.Header
			status            int
			body              string // a part of it
			reached           bool
		}{
			{"bearer", "GET", "https://api.example.com/v1/repos", http.Header{"Authorization": {"Bearer " + r.apiPH}}, 200, "ok", true},
			{"post", "POST", "https://api.example.com/v1/x", http.Header{"Authorization": {"Bearer " + r.apiPH}}, 200, "ok", true},
			{"query", "GET", "https://api.example.com/v1/query?key=" + url.QueryEscape(r.apiPH), nil, 200, "ok", true},
			{"git basic", "GET", "https://git.example.com/acme/repo.git/info/refs", basic("x-access-token", r.gitPH), 200, "ok", true},
			{"git injected", "GET", "https://git.example.com/acme/repo.git/info/refs", nil, 200, "ok", true},
			{"deny rule", "DELETE", "https://api.example.com/v1/repos", http.Header{"Authorization": {"Bearer " + r.apiPH}}, 403, "secret api may not be sent in DELETE /v1/repos to api.example.com:443: deny[0] DELETE /", false},
			{"no allow rule", "GET", "https://api.example.com/v2/repos", http.Header{"Authorization": {"Bearer " + r.apiPH}}, 403, "no allow rule matches (secrets[name=api].rules)", false},
			{"another secret's placeholder", "GET", "https://api.example.com/v1/repos", http.Header{"X-Token": {r.gitPH}, "Authorization": {"Bearer " + r.apiPH}}, 403, "secret git is not bound to api.example.com:443", false},
			{"another host", "GET", "https://api.example.com/v1/repos", http.Header{"Authorization": {"Bearer " + r.apiPH}, "Host": {"evil.example.com"}}, 421, "a request for evil.example.com on a connection to api.example.com:443", false},
			{"no placeholder", "GET", "https://api.example.com/v1/repos", nil, 401, "unauthorized", true},
		} {
			before := r.seenCount()
			status, body, _, proto, err := do(c, tc.method, tc.url, tc.h)
			name := fmt.Sprintf("%s (h2 %v)", tc.name, h2)
			switch {
			case err != nil:
				t.Errorf("%s: %v", name, err)
			case status != tc.status || !strings.Contains(body, tc.body):
				t.Errorf("%s: %d %q, want %d with %q", name, status, body, tc.status, tc.body)
			case proto != map[bool]int{false: 1, true: 2}[h2]:
				t.Errorf("%s: HTTP/%d", name, proto)
			case (r.seenCount() > before) != tc.reached:
				t.Errorf("%s: reached the upstream: %v, want %v", name, r.seenCount() > before, tc.reached)
			case strings.Contains(body, apiSecret) || strings.Contains(body, gitSecret):
				t.Errorf("%s: the answer holds a secret: %q", name, body)
			}
		}
		c.CloseIdleConnections()
	}
	counts := r.srv.SecretCounts()
	if len(counts) != 2 || counts[0].Secret != "api" || counts[0].Swaps != 6 || counts[0].Refused[ReasonSecretRule] != 4 ||
		counts[1].Secret != "git" || counts[1].Swaps != 4 || counts[1].Refused[ReasonSecretUnbound] != 2 {
		t.Errorf("counts %+v", counts)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	refused := 0
	for _, rec := range r.records {
		if rec.Reason == ReasonSecretRule || rec.Reason == ReasonSecretUnbound {
			refused++
			if rec.Agent != 1 || rec.Name != "api.example.com" || strings.Contains(rec.Detail, apiSecret) {
				t.Errorf("refusal record %+v", rec)
			}
		}
	}
	if refused != 6 {
		t.Errorf("%d refusals recorded, want 6: %+v", refused, r.records)
	}
}

// A secret the upstream echoes reaches the agent as its placeholder, in
// the headers and in a streamed body, whose first event arrives before
// the stream ends.
func TestInterceptUnswapsAStreamAsItComes(t *testing.T) {
	r := newSecretRig(t)
	for _, h2 := range []bool{false, true} {
		c := r.client(h2, r.flockCA, r.upstreamCA)
		req, _ := http.NewRequest("GET", "https://api.example.com/v1/echo", nil)
		req.Header.Set("Authorization", "Bearer "+r.apiPH)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("X-Echo"); got != "Bearer "+r.apiPH {
			t.Errorf("h2 %v: X-Echo %q, want the placeholder", h2, got)
		}
		br := bufio.NewReader(resp.Body)
		first, err := br.ReadString('\n')
		if err != nil || first != "data: Bearer "+r.apiPH+"\n" {
			t.Errorf("h2 %v: first event %q, %v", h2, first, err)
		}
		r.streamGo <- struct{}{} // the upstream goes on only once the first event was read
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "\ndata: again Bearer "+r.apiPH+"\n\n" {
			t.Errorf("h2 %v: the rest %q, %v", h2, rest, err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
	}
}

// An agent not granted the secret, and a host no secret of the agent is
// bound to, get the plain tunnel: the upstream's own certificate, which
// a client trusting only the flock's CA refuses.
func TestInterceptOnlyGrantedHosts(t *testing.T) {
	r := newSecretRig(t)
	for _, tc := range []struct {
		name string
		uid  uint32
		url  string
	}{
		{"not granted", ungrantedUID, "https://api.example.com/v1/x"},
		{"a host of no secret", agentUID, "https://plain.example.com/"},
	} {
		r.uids.set(tc.uid, nil)
		flockOnly := r.client(false, r.flockCA)
		if _, _, _, _, err := do(flockOnly, "GET", tc.url, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: a client trusting only the flock's CA: %v, want a certificate error", tc.name, err)
		}
		upstreamOnly := r.client(false, r.upstreamCA)
		status, _, _, _, err := do(upstreamOnly, "GET", tc.url, http.Header{"Authorization": {"Bearer " + r.apiPH}})
		if err != nil || status == http.StatusForbidden {
			t.Errorf("%s: through the tunnel: %d, %v", tc.name, status, err)
		}
		if tc.uid == ungrantedUID && status != http.StatusUnauthorized {
			t.Errorf("%s: the placeholder was swapped (%d)", tc.name, status)
		}
		upstreamOnly.CloseIdleConnections()
	}
}

// A large answer (read a buffer full at a time, its records written
// together) reaches the agent whole, over HTTP/1.1 and HTTP/2.
func TestInterceptCarriesALargeAnswer(t *testing.T) {
	r := newSecretRig(t)
	const size = 3<<20 + 77
	for _, h2 := range []bool{false, true} {
		status, body, _, proto, err := do(r.client(h2, r.flockCA), "GET", fmt.Sprintf("https://api.example.com/v1/big/%d", size), http.Header{"Authorization": {"Bearer " + r.apiPH}})
		if err != nil || status != http.StatusOK || len(body) != size || strings.Trim(body, "\x00") != "" {
			t.Errorf("HTTP/%d: %d, %d bytes, %v; want 200 and %d zeros", proto, status, len(body), err, size)
		}
	}
}

// The proxy verifies an intercepted host's upstream against Roots, or
// the system's roots when Roots is nil (read once, not at each
// connection), never against the flock's CA: an upstream it cannot
// verify gets a 502 that says so, and the secret is not sent.
func TestInterceptVerifiesTheUpstream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roots func(r *secretRig) *x509.CertPool
		want  int
	}{
		{"the upstream's CA", func(r *secretRig) *x509.CertPool { return poolOf(r.upstreamCA) }, http.StatusOK},
		{"the flock's CA only", func(r *secretRig) *x509.CertPool { return poolOf(r.flockCA) }, http.StatusBadGateway},
		{"the system's", func(*secretRig) *x509.CertPool { return nil }, http.StatusBadGateway},
	} {
		r := newSecretRigOf(t, false, func(r *secretRig) { r.srv.Roots = tc.roots(r) })
		status, body, _, _, err := do(r.client(false, r.flockCA), "GET", "https://api.example.com/v1/x", http.Header{"Authorization": {"Bearer " + r.apiPH}})
		if err != nil || status != tc.want {
			t.Errorf("%s: %d %q, %v; want %d", tc.name, status, body, err, tc.want)
		}
		if tc.want == http.StatusBadGateway && (!strings.Contains(body, "certificate") || r.seenCount() != 0) {
			t.Errorf("%s: %q, %d requests reached the upstream; want a certificate error and none", tc.name, body, r.seenCount())
		}
	}
	// The system's roots are one pool, which the flock's CA is not in.
	var s Server
	a, errA := s.roots()
	b, errB := s.roots()
	if errA != nil || errB != nil || a != b {
		t.Fatalf("the system's roots: %p, %v then %p, %v; want the same pool", a, errA, b, errB)
	}
	ca, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: a, DNSName: "api.example.com"}); err == nil {
		t.Error("a leaf of the flock's CA verifies against the system's roots")
	}
}

func poolOf(ca *secrets.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Certificate())
	return p
}

// openIntercepted opens a CONNECT to api.example.com and the agent's TLS
// over it, trusting the flock's CA.
func (r *secretRig) openIntercepted(t *testing.T) *tls.Conn {
	t.Helper()
	c, _ := connectThrough(t, r.addr, "api.example.com:443", 5*time.Second)
	pool := x509.NewCertPool()
	pool.AddCert(r.flockCA.Certificate())
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "api.example.com", NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// waitGoroutines polls until no more goroutines run than want.
func waitGoroutines(t *testing.T, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: %d goroutines, want at most %d:\n%s", what, runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that goes away mid-request, and one that sends its headers a
// byte at a time, leave nothing running behind them.
func TestInterceptLeaksNothing(t *testing.T) {
	r := newSecretRig(t)
	// Warm up: the upstream's and the proxy's first connections.
	c := r.client(false, r.flockCA)
	do(c, "GET", "https://api.example.com/v1/x", http.Header{"Authorization": {"Bearer " + r.apiPH}})
	c.CloseIdleConnections()
	r.upstream.CloseClientConnections()
	base := runtime.NumGoroutine()
	waitGoroutines(t, base, "after the warm-up")

	tc := r.openIntercepted(t)
	fmt.Fprintf(tc, "POST /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\npartial", r.apiPH)
	deadline := time.Now().Add(5 * time.Second)
	for r.seenCount() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	tc.Close() // reset mid-request, the upstream waiting for the body
	waitGoroutines(t, base, "a client reset mid-request")

	tc = r.openIntercepted(t)
	start := time.Now()
	go func() {
		for _, b := range []byte("GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\nX-Slow: ") {
			if _, err := tc.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		for {
			if _, err := tc.Write([]byte("a")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err == nil {
		resp.Body.Close()
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("a slow header held the connection %s (read header timeout %s)", took, r.srv.timeout())
	}
	tc.Close()
	waitGoroutines(t, base, "a slow header")
}

// A secret's refusals are logged a few a minute per agent and reason,
// the rest counted on the next one logged.
func TestJournalLimitsSecretRefusals(t *testing.T) {
	now := time.Unix(1000, 0)
	logged := 0
	j := &Journal{Now: func() time.Time { return now }, Send: func(string, map[string]string) error { logged++; return nil }}
	for range 100 {
		j.Record(Record{Agent: 1, Name: "api.example.com", Port: 443, Reason: ReasonSecretRule})
	}
	if logged != secretBurst {
		t.Errorf("%d refusals logged in a minute, want %d", logged, secretBurst)
	}
}

// Unit tier. A reload's bindings apply to the next request of a
// connection opened before it, over HTTP/1.1 and HTTP/2: a rotated
// secret is sent at once, and a host no longer bound to a secret of the
// agent's is a 421, which clients answer with a new connection.
func TestInterceptFollowsTheBindingsOfEachRequest(t *testing.T) {
	r := newSecretRig(t)
	bind := func(api string, both bool) {
		b := secrets.Bindings{secrets.Bind(r.git, []byte(gitSecret), r.gitPH)}
		if both {
			b = append(b, secrets.Bind(r.api, []byte(api), r.apiPH))
		}
		r.srv.SetIntercept(Intercept{CA: r.flockCA, Agents: map[uint32]secrets.Bindings{agentUID: b}})
	}
	for _, h2 := range []bool{false, true} {
		bind(apiSecret, true)
		c := r.client(h2, r.flockCA, r.upstreamCA)
		reused := []bool{}
		get := func() (int, string) {
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/repos", nil)
			req.Header.Set("Authorization", "Bearer "+r.apiPH)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v: %v", h2, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		lastAuth := func() string {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.seen[len(r.seen)-1].Header.Get("Authorization")
		}
		if status, body := get(); status != 200 {
			t.Fatalf("h2 %v: before the reload: %d %q", h2, status, body)
		}
		bind("sk-test-rotated", true)
		if status, _ := get(); status != 401 || lastAuth() != "Bearer sk-test-rotated" {
			t.Errorf("h2 %v: after the rotation the upstream got %q (%d), want the rotated secret", h2, lastAuth(), status)
		}
		before := r.seenCount()
		bind(apiSecret, false)
		status, body := get()
		if status != http.StatusMisdirectedRequest && !(h2 && status == 401) {
			t.Errorf("h2 %v: a host no longer bound: %d %q, want 421", h2, status, body)
		}
		if r.seenCount() != before && lastAuth() != "Bearer "+r.apiPH {
			t.Errorf("h2 %v: a host no longer bound got %q", h2, lastAuth())
		}
		if len(reused) < 3 || !reused[1] {
			t.Errorf("h2 %v: the requests' connections reused %v: the rotation was not tested on an open connection", h2, reused)
		}
		c.CloseIdleConnections()
	}
}
