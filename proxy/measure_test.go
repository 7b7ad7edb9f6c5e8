package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestMeasure prints a 100 MB HTTPS download's throughput and a new
// connection's time to first byte, through the proxy and direct, on
// loopback. Only with FLOCK_MEASURE=1 (not in CI: it moves 1 GB).
func TestMeasure(t *testing.T) {
	if os.Getenv("FLOCK_MEASURE") == "" {
		t.Skip("FLOCK_MEASURE=1 to measure")
	}
	chunk := []byte(strings.Repeat("x", 1<<20))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			io.WriteString(w, "x")
			return
		}
		for range 100 {
			w.Write(chunk)
		}
	}))
	defer srv.Close()
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	r.srv.Record = nil
	r.srv.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := func(proxied bool) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		if proxied {
			tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr})
		} else {
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, srv.Listener.Addr().String())
			}
		}
		return &http.Client{Transport: tr}
	}
	get := func(c *http.Client, path string) (time.Duration, int64) {
		start := time.Now()
		resp, err := c.Get("https://example.com" + path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start), n
	}
	for _, proxied := range []bool{false, true} {
		c := client(proxied)
		var best time.Duration
		for range 5 {
			d, n := get(c, "/big")
			if n != 100<<20 {
				t.Fatalf("got %d bytes", n)
			}
			if best == 0 || d < best {
				best = d
			}
		}
		var ttfb []time.Duration
		for range 200 {
			d, _ := get(c, "/")
			ttfb = append(ttfb, d)
		}
		sort.Slice(ttfb, func(i, j int) bool { return ttfb[i] < ttfb[j] })
		t.Logf("proxied=%v: 100 MB in %s (%.0f MB/s, best of 5); new connection + TLS + GET p50 %s p90 %s",
			proxied, best, 100/best.Seconds(), ttfb[len(ttfb)/2], ttfb[len(ttfb)*9/10])
	}
}
