package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchns"
	"github.com/flockrun/flock/test/benchrow"
)

// byClient says the clients from 127.0.0.2 are agent 2 (the flooder,
// whose sockets are its uid's in a firewalled run: benchns), every other
// agent 1.
type byClient struct{}

func (byClient) UID(client, _ netip.AddrPort) (uint32, error) {
	if client.Addr() == netip.MustParseAddr("127.0.0.2") {
		return benchns.UID(2), nil
	}
	return benchns.UID(1), nil
}

// holdHandshakes is an agent at its share of handshakes: 8 connections
// that never finish their request, and one more tried (and refused) as
// fast as its half a core lets it, until stop.
func holdHandshakes(addr string, stop <-chan struct{}) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var th benchns.Throttle
	for {
		select {
		case <-stop:
			return
		default:
		}
		th.Step()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		c, err := benchns.DialAs(benchns.UID(2), &d, "tcp", addr)
		if err != nil {
			continue
		}
		io.WriteString(c, "CONNECT exa")
		if len(held) < spec.DefaultHandshakes {
			held = append(held, c)
			continue
		}
		io.Copy(io.Discard, c) // the 403, at once
		c.Close()
	}
}

// BenchmarkEgressProxy is make bench's rows for the proxy: a 100 MB HTTPS
// download's throughput and a new connection's time to first byte (TCP,
// TLS, GET), through the proxy as flock-proxy runs it (dispatch beside
// the gateway, CONNECT, the uid lookup, the policy, the SNI check, the
// copies) against the same client straight to the same server on
// loopback, in the same run.
func BenchmarkEgressProxy(b *testing.B) {
	if !benchns.Enter(b, "BenchmarkEgressProxy") {
		return
	}
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
	// Two proxies for the same agent: with its shares (tunnels,
	// handshakes, the idle watch), and without them (the caps' floor).
	// Each has a gateway beside it, as flock-proxy always has: every
	// connection is read by dispatch first, and a tunnel's bytes from
	// the agent pass through its reader (the gateway gets no request).
	gw := gateway.NewListener(&net.TCPAddr{})
	defer gw.Close()
	mkRig := func(a AgentRules, idle time.Duration) *rig {
		a.ID, a.Rules = 1, rules(t, "example.com:443")
		flood := a
		flood.ID = 2
		r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{benchns.UID(1): a, benchns.UID(2): flood}},
			func(s *Server) { s.Gateway = gw })
		r.srv.UIDs = byClient{}
		r.srv.Record, r.srv.Idle = nil, idle
		r.srv.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		}
		return r
	}
	r := mkRig(AgentRules{Tunnels: spec.DefaultTunnels, Handshakes: spec.DefaultHandshakes}, 0)
	// The flooder reaches the proxy as an agent with names does, at the
	// default connect rate.
	at := netip.MustParseAddrPort(r.addr)
	benchns.Apply(b, netpolicy.Policy{BusHost: at.Addr(), BusPort: 4222, AgentUIDs: []uint32{benchns.UID(2)},
		ConnectRate: spec.DefaultConnectRate, Proxy: at,
		Egress: map[uint32][]netpolicy.Allow{benchns.UID(2): {{Prefix: netip.PrefixFrom(at.Addr(), 32), Port: at.Port(), Proto: "tcp"}}}})
	bare := mkRig(AgentRules{}, -1)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	clientOf := func(via *rig) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: via.addr})
		return &http.Client{Transport: tr}
	}
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
	// The caps' cost: the same agent through a proxy without its shares,
	// in the same run.
	var capped, uncapped []float64
	for range benchrow.Reps(5) {
		for i, via := range []*rig{bare, r} {
			c := clientOf(via)
			var ttfb []float64
			for range 100 {
				d, _ := get(c, "/")
				ttfb = append(ttfb, float64(d.Microseconds())/1000)
			}
			sort.Float64s(ttfb)
			if i == 0 {
				uncapped = append(uncapped, ttfb[len(ttfb)/2])
			} else {
				capped = append(capped, ttfb[len(ttfb)/2])
			}
		}
	}
	// Another agent at its shares: its handshakes held open, its next
	// connections refused, over and over; the bystander's connections go
	// on at their quiet pace.
	var quiet, flooded []float64
	for range benchrow.Reps(5) {
		for i := range 2 {
			stop := make(chan struct{})
			if i == 1 {
				go holdHandshakes(r.addr, stop)
			}
			c := clientOf(r)
			var ttfb []float64
			for range 100 {
				d, _ := get(c, "/")
				ttfb = append(ttfb, float64(d.Microseconds())/1000)
			}
			close(stop)
			sort.Float64s(ttfb)
			if i == 0 {
				quiet = append(quiet, ttfb[len(ttfb)*99/100])
			} else {
				flooded = append(flooded, ttfb[len(ttfb)*99/100])
			}
		}
	}
	note := "client, proxy and server on loopback, sharing the cores"
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "new connection + TLS + GET, p50 of 100, with the agent's shares", Floor: "the same proxy without them",
		Unit: "ms", Flock: capped, Base: uncapped, Goal: "within noise", Note: note})
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "new connection + TLS + GET, p99 of 100, while another agent floods its handshakes", Floor: "the same, quiet",
		Unit: "ms", Flock: flooded, Base: quiet, Goal: "≤ 2x", Note: floodNote()})
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "100 MB HTTPS download through flock-proxy", Floor: "the same download direct",
		Unit: "MB/s", Higher: true, Flock: mbps[1], Base: mbps[0], Goal: "≥ 0.9x", Note: note})
	benchrow.Print(t, benchrow.Row{Group: "egress", What: "new connection + TLS + GET, p50 of 100, through flock-proxy", Floor: "the same direct",
		Unit: "ms", Flock: p50[1], Base: p50[0], Goal: "≤ 1 ms added", Note: note})
}

func floodNote() string {
	n := "the flooder (another uid) holds its 8 handshakes on the same proxy and is refused more, as fast as half a core (its unit's default CPUQuota) lets it"
	if benchns.Firewalled() {
		return n + "; flock's firewall in force (a network namespace of the benchmark's own, the flooder's sockets its uid's), at the default connect rate"
	}
	return n + "; NOT firewalled (not root): the kernel's connect rate is not in force"
}
