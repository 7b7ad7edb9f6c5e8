package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/benchrow"
)

// BenchmarkEgressProxy is make bench's rows for the proxy: a 100 MB HTTPS
// download's throughput and a new connection's time to first byte (TCP,
// TLS, GET), through the proxy (CONNECT, the uid lookup, the policy, the
// SNI check, the splice) against the same client straight to the same
// server on loopback, in the same run.
func BenchmarkEgressProxy(b *testing.B) {
	t := b
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
	// Each repetition measures both ways back to back, so a noisy moment
	// of the machine falls on both.
	var mbps, p50 [2][]float64 // [direct, proxied]
	for range benchrow.Reps(5) {
		for i, proxied := range []bool{false, true} {
			c := client(proxied)
			d, n := get(c, "/big")
			if n != 100<<20 {
				t.Fatalf("got %d bytes", n)
			}
			mbps[i] = append(mbps[i], 100/d.Seconds())
			var ttfb []float64
			for range 100 {
				d, _ := get(c, "/")
				ttfb = append(ttfb, float64(d.Microseconds())/1000)
			}
			sort.Float64s(ttfb)
			p50[i] = append(p50[i], ttfb[len(ttfb)/2])
		}
	}
	note := "client, proxy and server on loopback, sharing the cores"
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "100 MB HTTPS download through flock-proxy", Floor: "the same download direct",
		Unit: "MB/s", Higher: true, Flock: mbps[1], Base: mbps[0], Goal: "≥ 0.9x", Note: note})
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "new connection + TLS + GET, p50 of 100, through flock-proxy", Floor: "the same direct",
		Unit: "ms", Flock: p50[1], Base: p50[0], Goal: "≤ 1 ms added", Note: note})
}
