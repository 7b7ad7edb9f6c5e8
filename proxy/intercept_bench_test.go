package proxy

import (
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/flockrun/flock/test/benchrow"
)

// BenchmarkSecretIntercept is make bench's rows for the secrets' hosts:
// a request over a kept-alive connection, a new connection (CONNECT,
// TLS, GET) and a 100 MB download, each through a connection the proxy
// intercepts (TLS ended and begun again, the placeholder swapped, the
// answer read for the secret) against the same agent's plain tunnel to
// another name of the same upstream, through the same proxy, in the same
// run.
func BenchmarkSecretIntercept(b *testing.B) {
	// An upstream of HTTP/1.1, as the plain tunnel's client speaks to it:
	// what the proxy adds, not Go's HTTP/2 server against its HTTP/1.1.
	r := newSecretRigOf(b, false)
	r.srv.Record = nil
	auth := http.Header{"Authorization": {"Bearer " + r.apiPH}}
	url := map[bool]string{true: "https://api.example.com/v1", false: "https://plain.example.com"}
	get := func(c *http.Client, intercepted bool, path string) (time.Duration, int64) {
		req, _ := http.NewRequest("GET", url[intercepted]+path, nil)
		req.Header = auth.Clone()
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", req.URL, resp.StatusCode)
		}
		return time.Since(start), n
	}
	p50 := func(c *http.Client, intercepted bool) float64 {
		var ms []float64
		for range 200 {
			d, _ := get(c, intercepted, "/x")
			ms = append(ms, float64(d.Microseconds())/1000)
		}
		sort.Float64s(ms)
		return ms[len(ms)/2]
	}
	const size = 100 << 20
	// [plain, intercepted]; each repetition measures both back to back.
	var kept, fresh, mbps [2][]float64
	for range benchrow.Reps(5) {
		for i, intercepted := range []bool{false, true} {
			c := r.client(false, r.flockCA, r.upstreamCA)
			get(c, intercepted, "/x") // the connection, once
			kept[i] = append(kept[i], p50(c, intercepted))
			d, n := get(c, intercepted, "/big/104857600")
			if n != size {
				b.Fatalf("got %d bytes", n)
			}
			mbps[i] = append(mbps[i], 100/d.Seconds())
			c.CloseIdleConnections()
			c = r.client(false, r.flockCA, r.upstreamCA)
			c.Transport.(*http.Transport).DisableKeepAlives = true
			fresh[i] = append(fresh[i], p50(c, intercepted))
		}
	}
	note := "client, proxy and stand-in upstream on loopback, sharing the cores; HTTP/1.1 both sides, a Bearer placeholder swapped in each intercepted request"
	benchrow.Print(b, benchrow.Row{Group: "egress", What: "a request over a kept-alive connection to a secret's host, p50 of 200", Floor: "the same through a plain tunnel",
		Unit: "ms", Flock: kept[1], Base: kept[0], Goal: "≤ 1 ms added", Note: note})
	benchrow.Print(b, benchrow.Row{Group: "egress", What: "new connection + TLS + GET to a secret's host, p50 of 200", Floor: "the same through a plain tunnel",
		Unit: "ms", Flock: fresh[1], Base: fresh[0], Goal: "≤ 3 ms added", Note: note + "; the proxy's own TLS to the upstream is made at the first request"})
	benchrow.Print(b, benchrow.Row{Group: "egress", What: "100 MB download from a secret's host", Floor: "the same through a plain tunnel",
		Unit: "MB/s", Higher: true, Flock: mbps[1], Base: mbps[0], Goal: "≥ 0.9x", Note: note + "; where the three share the cores, " +
			"the proxy's second TLS bounds the ratio below the goal: the row of flock-proxy's CPU per 100 MB says by how much"})
}
