package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// fakeUIDs says every client is uid (the test's stand-in for sock_diag).
type fakeUIDs struct {
	mu  sync.Mutex
	uid uint32
	err error // the kernel knows no such socket
}

func (f *fakeUIDs) UID(_, _ netip.AddrPort) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uid, f.err
}

// set makes every client uid from now on (the server reads it at once).
func (f *fakeUIDs) set(uid uint32, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uid, f.err = uid, err
}

// fakeDNS resolves from a table.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

type rig struct {
	srv     *Server
	addr    string // the proxy's
	uids    *fakeUIDs
	mu      sync.Mutex
	records []Record
	dialed  []string
	https   *httptest.Server
}

func rules(t testing.TB, rs ...string) []spec.Egress {
	var out []spec.Egress
	for _, r := range rs {
		e, err := spec.ParseEgress(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// newRig runs a proxy whose every dial lands on one HTTPS server (its
// certificate is for example.com), names resolving per dns.
func newRig(t testing.TB, dns fakeDNS, p Policy, before ...func(*Server)) *rig {
	r := &rig{uids: &fakeUIDs{uid: 1001}}
	r.https = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello from upstream")
	}))
	t.Cleanup(r.https.Close)
	r.srv = &Server{UIDs: r.uids, Resolver: dns, Timeout: 2 * time.Second,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			r.mu.Lock()
			r.dialed = append(r.dialed, addr)
			r.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, r.https.Listener.Addr().String())
		},
		Record: func(rec Record) {
			r.mu.Lock()
			r.records = append(r.records, rec)
			r.mu.Unlock()
		}}
	r.srv.SetPolicy(p)
	for _, f := range before {
		f(r.srv)
	}
	r.addr = serve(t, r.srv)
	return r
}

// serve runs srv on a loopback port until the test ends, and returns its
// address.
func serve(t testing.TB, srv *Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// last waits for the record of the connection just made.
func (r *rig) last(t *testing.T, n int) Record {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		if len(r.records) >= n {
			rec := r.records[n-1]
			r.mu.Unlock()
			return rec
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no record %d", n)
	return Record{}
}

// get fetches https://host/ through the proxy, trusting the test server.
func (r *rig) get(host string) (string, error) {
	pool := r.https.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr}),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	defer c.CloseIdleConnections() // the tunnel ends, and is recorded
	resp, err := c.Get("https://" + host + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// connect sends a raw CONNECT and returns the status line and body.
func (r *rig) connect(t *testing.T, target string) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", time.Since(start) // a tunnel: no body
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start)
}

var (
	public  = netip.MustParseAddr("192.0.2.10")
	loop    = netip.MustParseAddr("127.0.0.1")
	meta    = netip.MustParseAddr("169.254.169.254")
	testDNS = fakeDNS{
		"example.com":         {public},
		"other.example.org":   {public},
		"rebind.example.com":  {loop},
		"mapped.example.com":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"meta.example.com":    {meta},
		"mixed.example.com":   {loop, public},
		"private.example.com": {netip.MustParseAddr("10.9.8.7")},
	}
)

func TestAllowedNameIsCarried(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	body, err := r.get("example.com")
	if err != nil || body != "hello from upstream" {
		t.Fatalf("get = %q, %v", body, err)
	}
	rec := r.last(t, 1)
	if !rec.Allowed() || rec.Agent != 1 || rec.Name != "example.com" || rec.Port != 443 || rec.Addr != public || rec.BytesUp == 0 || rec.BytesDown == 0 {
		t.Errorf("record %+v", rec)
	}
	f := rec.Fields()
	if f["AGENT_ID"] != "1" || f["NAME"] != "example.com" || f["PORT"] != "443" || f["ADDR"] != "192.0.2.10" || f["REASON"] != "allowed" || f["DECISION"] != "allow" {
		t.Errorf("fields %v", f)
	}
}

func TestRefusals(t *testing.T) {
	p := Policy{Agents: map[uint32]AgentRules{
		1001: {ID: 1, Rules: rules(t, "example.com:443", "*.example.com:443", "10.0.0.0/8:8443")},
		1002: {ID: 2, Rules: rules(t, "other.example.org:443")},
	}}
	for _, c := range []struct {
		name, target string
		uid          uint32
		reason, body string
	}{
		{"another name", "other.example.org:443", 1001, ReasonNoRule,
			`flock proxy: agent 1: refused: CONNECT other.example.org:443: not in its egress; add "other.example.org:443" to agents[id=1].egress`},
		{"another port", "example.com:8443", 1001, ReasonNoRule, `add "example.com:8443" to agents[id=1].egress`},
		{"another agent's name", "example.com:443", 1002, ReasonNoRule, "agent 2: refused"},
		{"not an agent", "example.com:443", 1003, ReasonNotAgent, "flock proxy: refused: uid 1003 is not an agent"},
		{"ip literal", "192.0.2.10:443", 1001, ReasonIPLiteral, "192.0.2.10:443: an address, not a name; add 192.0.2.10:443 to agents[id=1].egress"},
		{"ipv6 literal", "[2001:db8::1]:443", 1001, ReasonIPLiteral, "[2001:db8::1]:443: an address"},
		{"name to loopback", "rebind.example.com:443", 1001, ReasonPrivateAddr, "the name resolves into this host's or a private network; add that address to agents[id=1].egress if it is meant (it resolves to 127.0.0.1)"},
		{"name to mapped loopback", "mapped.example.com:443", 1001, ReasonPrivateAddr, "(it resolves to 127.0.0.1)"},
		{"name to metadata", "meta.example.com:443", 1001, ReasonPrivateAddr, "(it resolves to 169.254.169.254)"},
		{"unresolved name", "nx.example.com:443", 1001, ReasonNoAddress, "the name does not resolve"},
		{"no port", "example.com", 1001, ReasonBadTarget, "has no port"},
		{"bad name", "exa_mple.com:443", 1001, ReasonBadTarget, "is not a host name"},
		{"wildcard", "*.example.com:443", 1001, ReasonBadTarget, "is not a host name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testDNS, p)
			r.uids.set(c.uid, nil)
			code, body, took := r.connect(t, c.target)
			if code != http.StatusForbidden || !strings.Contains(body, c.body) || strings.Count(body, "\n") != 1 {
				t.Errorf("got %d %q, want 403 with %q", code, body, c.body)
			}
			if took > 500*time.Millisecond {
				t.Errorf("denial took %s", took)
			}
			if rec := r.last(t, 1); rec.Reason != c.reason || rec.Allowed() {
				t.Errorf("record %+v, want reason %s", rec, c.reason)
			}
			if len(r.dialed) != 0 {
				t.Errorf("dialed %v", r.dialed)
			}
		})
	}
}

// A name that resolves to this host or a private network is carried only
// where an address rule of the agent names that address, and only there.
func TestRebindingNeedsAnAddressRule(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1,
		Rules: rules(t, "*.example.com:443", "10.9.8.0/24:443")}}})
	if body, err := r.get("private.example.com"); err != nil {
		t.Errorf("private.example.com: %q %v", body, err)
	}
	if rec := r.last(t, 1); rec.Reason == ReasonPrivateAddr || rec.Addr.String() != "10.9.8.7" {
		t.Errorf("private.example.com with a rule for 10.9.8.0/24: %+v", rec)
	}
	// Mixed answers: only the public address is dialed.
	r.get("mixed.example.com")
	if rec := r.last(t, 2); rec.Addr != public {
		t.Errorf("mixed.example.com: %+v", rec)
	}
	for _, d := range r.dialed {
		if strings.HasPrefix(d, "127.") {
			t.Errorf("dialed %s", d)
		}
	}
}

// The tunnel carries only a ClientHello for the name CONNECT asked for.
func TestSNIMustBeTheConnectName(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	for i, sni := range []string{"other.example.org", ""} {
		c, _ := r.connected(t)
		tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err := tc.Handshake(); err == nil {
			t.Errorf("sni %q: handshake through the tunnel succeeded", sni)
		}
		c.Close()
		if rec := r.last(t, i+1); rec.Reason != ReasonSNIMismatch {
			t.Errorf("sni %q: record %+v", sni, rec)
		}
	}
	// Bytes that are not TLS at all.
	c, _ := net.Dial("tcp", r.addr)
	io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	io.Copy(io.Discard, c)
	c.Close()
	if rec := r.last(t, 3); rec.Reason != ReasonNotTLS {
		t.Errorf("plain bytes: %+v", rec)
	}
	if len(r.dialed) != 0 {
		t.Errorf("dialed %v", r.dialed)
	}
}

func TestPlainHTTPIsRefused(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr})}}
	resp, err := c.Get("http://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "only HTTPS is carried") {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}

// A new policy applies to new connections; a tunnel open under the old
// one goes on.
func TestReloadKeepsOpenTunnels(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	pool := r.https.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr}), TLSClientConfig: &tls.Config{RootCAs: pool}}
	c := &http.Client{Timeout: 3 * time.Second, Transport: tr}
	get := func() error {
		resp, err := c.Get("https://example.com/")
		if err != nil {
			return err
		}
		io.ReadAll(resp.Body)
		return resp.Body.Close()
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := r.connect(t, "other.example.org:443"); code != 403 {
		t.Fatalf("before: %d", code)
	}
	r.last(t, 1) // the 403's record, written after its answer
	r.srv.SetPolicy(Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "other.example.org:443")}}})
	// The kept-alive tunnel to example.com still carries requests.
	if err := get(); err != nil {
		t.Errorf("open tunnel after reload: %v", err)
	}
	r.mu.Lock()
	n := len(r.records)
	r.mu.Unlock()
	if n != 1 {
		t.Errorf("%d records, want the tunnel still open (1 record: the 403)", n)
	}
	if code, body, _ := r.connect(t, "example.com:443"); code != 403 {
		t.Errorf("new connection to the removed name: %d %q", code, body)
	}
	code, _, _ := r.connect(t, "other.example.org:443")
	if code != 200 {
		t.Errorf("new connection to the added name: %d", code)
	}
}

// A request that never ends is cut at maxRequest and refused at once.
func TestHugeRequestIsRefused(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	go func() {
		io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\nX-Long: ")
		chunk := strings.Repeat("a", 64<<10)
		for range 100 { // 6.4 MB, one header line
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("got %v %v, want a 403", resp, err)
	}
	// At once, not at the request deadline (2 s here) after reading it all.
	if took := time.Since(start); took > time.Second {
		t.Errorf("refused after %s", took)
	}
	if rec := r.last(t, 1); rec.Reason != ReasonNotConnect {
		t.Errorf("record %+v", rec)
	}
}
