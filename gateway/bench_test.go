package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/test/standin"
	"github.com/flockrun/flock/wire"
)

// BenchmarkModelGateway is make bench's rows for the model gateway: what
// it adds to a request, to the first event of a stream and to a stream's
// throughput, against the same client reaching the same stand-in
// upstream directly, in the same run (gateway.go: the uid lookup per
// connection, the grant, the limits, the key, the meter, the proxy's
// second connection), with every scope judged: the agent's grant limits
// tokens and dollars and it is in two budgets, each reserved in and
// settled with every request of a priced model; and the same for a worker
// holding a task with a budget of its own, the desk asked over NATS on
// loopback with each request. The figures of 100 agents at once are
// BenchmarkModelGatewayAgents's.
func BenchmarkModelGateway(b *testing.B) {
	lots := spec.MoneyLimits{TokensPerDay: spec.MaxTokens, USDPerDay: 1000 * wire.USD}
	limited := map[string]spec.Grant{"anth": {Provider: "anth", TokensPerDay: lots.TokensPerDay, USDPerDay: lots.USDPerDay}}
	// B is the agent; A, the same in a worker holding a task.
	agents := grants(limited, limited)
	agents[uidA] = Agent{ID: idA, Grants: limited, Worker: true, TaskBudget: wire.TaskBudget{Tokens: spec.MaxTokens, USD: 1000 * wire.USD}}
	r := newRig(b, agents)
	r.withBudgets(agents, spec.Budget{Name: "team", Agents: []int{idA, idB}, Limits: lots}, spec.Budget{Name: "flock", Agents: []int{idA, idB}, Limits: lots})
	r.g.Leases = deskOnLoopback(b, wire.Held{Seq: 1, ID: "bench", Agent: idA})
	priced := func(req string) string { return strings.Replace(req, `"model":"claude-x"`, `"model":"`+sonnet+`"`, 1) }
	anthropicReq, anthropicStreamReq := priced(anthropicReq), priced(anthropicStreamReq)
	pool := x509.NewCertPool()
	pool.AddCert(r.upSrv.Certificate())
	// The direct client speaks to the stand-in as an SDK would: TLS,
	// kept alive; the gateway's client speaks plain HTTP on loopback,
	// kept alive, as an agent's SDK to its base URL.
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	via, worker := r.client(uidB), r.client(uidA)
	url := func(viaGateway bool, path string) string {
		if viaGateway {
			return "http://" + r.addr + "/anth" + path
		}
		return r.upSrv.URL + path
	}
	post := func(c *http.Client, u, body string, headers ...string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("X-Api-Key", anthropicKey) // the direct client's own; the gateway drops it
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("POST %s: %v %v", u, err, resp)
		}
		return resp
	}
	var p50, p99 [3][]float64 // [direct, via the gateway, a worker's via the gateway]
	var first, mbps [2][]float64
	for range benchrow.Reps(5) {
		for i, c := range []*http.Client{direct, via, worker} {
			gw := c != direct
			var lat []float64
			for range 500 {
				start := time.Now()
				resp := post(c, url(gw, "/v1/messages"), anthropicReq)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, ms(time.Since(start)))
			}
			sort.Float64s(lat)
			p50[i], p99[i] = append(p50[i], lat[len(lat)/2]), append(p99[i], lat[len(lat)*99/100])
			if c == worker {
				continue
			}
			var ttfe []float64
			for range 100 {
				start := time.Now()
				resp := post(c, url(gw, "/v1/messages"), anthropicStreamReq, "X-Standin-Words", "20")
				br := bufio.NewReader(resp.Body)
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.HasPrefix(l, "data:") {
						break
					}
				}
				ttfe = append(ttfe, ms(time.Since(start)))
				io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			sort.Float64s(ttfe)
			first[i] = append(first[i], ttfe[len(ttfe)/2])
			// One long stream: 100,000 words, about 16 MB of events.
			start := time.Now()
			resp := post(c, url(gw, "/v1/messages"), anthropicStreamReq, "X-Standin-Words", "100000", "X-Standin-Flush", "64")
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mbps[i] = append(mbps[i], float64(n)/1e6/time.Since(start).Seconds())
		}
	}
	if u := r.g.Store.Usage(idB)["anth"]; u.Cost == 0 || u.DayCost == 0 {
		b.Fatalf("no cost counted (%+v): the money scopes were not judged", u)
	}
	if s := r.g.Store.Task(1); s.Cost != r.g.Store.Usage(idA)["anth"].Cost {
		b.Fatalf("the task was charged %s of the agent's %s: its scope was not judged", s.Cost, r.g.Store.Usage(idA)["anth"].Cost)
	}
	note := "client, gateway and the stand-in (TLS, HTTP/2) on loopback, sharing the cores; direct: the same client to the stand-in; the gateway judges the agent's grant (tokens and dollars) and two budgets, and a worker's its task's budget too, asking the desk (NATS on loopback) which task it holds"
	for _, row := range []benchrow.Row{
		{What: "a request (JSON answer), p50 of 500, through the gateway, every scope judged", Floor: "the same request direct", Unit: "ms", Flock: p50[1], Base: p50[0], Goal: "≤ 0.25 ms added"},
		{What: "a request (JSON answer), p99 of 500, through the gateway, every scope judged", Floor: "the same request direct", Unit: "ms", Flock: p99[1], Base: p99[0], Goal: "≤ 0.5 ms added"},
		{What: "a worker's request holding a task, p50 of 500: the desk asked, the task's budget judged too", Floor: "the same request direct", Unit: "ms", Flock: p50[2], Base: p50[0], Goal: "≤ 1 ms added"},
		{What: "a worker's request holding a task, p99 of 500", Floor: "the same request direct", Unit: "ms", Flock: p99[2], Base: p99[0], Goal: "≤ 1.5 ms added"},
		{What: "a stream's first event, p50 of 100, through the gateway", Floor: "the same stream direct", Unit: "ms", Flock: first[1], Base: first[0], Goal: "≤ 0.5 ms added"},
		{What: "a 16 MB stream of events through the gateway", Floor: "the same stream direct", Unit: "MB/s", Higher: true, Flock: mbps[1], Base: mbps[0], Goal: "≥ 0.9x"},
	} {
		row.Group, row.Note = "models", note
		benchrow.Print(b, row)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// standinTLS is the stand-in as an HTTP/2 TLS server, and its CA's PEM.
func standinTLS(tb testing.TB, s *standin.Server) (*httptest.Server, []byte) {
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return srv, pemOf(srv)
}

// freePort is a loopback address no one listens on now.
func freePort(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
