package proxy

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/test/benchrow"
)

// procAgents is how many agents intercept at once in the memory row,
// and procStreams how many of them have a download going.
const (
	procAgents  = 100
	procStreams = 25
)

// BenchmarkSecretInterceptProcess is make bench's rows of the proxy in a
// process of its own (the test binary run again as a proxy, procProxy),
// so that its CPU and memory are its own, not the clients' or the
// stand-in upstream's: its CPU per 100 MB downloaded, and its memory
// with 100 agents intercepting at once; each against the same through
// plain tunnels, through the same proxy, in the same run.
func BenchmarkSecretInterceptProcess(b *testing.B) {
	r := newSecretRigOf(b, false)
	r.srv.Record = nil
	phs := make([]string, procAgents)
	for i := range phs {
		phs[i] = secrets.Placeholder([]byte(apiSecret), rand.Reader)
	}
	trust := poolOf(r.flockCA)
	trust.AddCert(r.upstreamCA.Certificate())
	host := map[bool]string{true: "https://api.example.com", false: "https://plain.example.com"}

	// CPU seconds per 100 MB: the proxy's (its process's) and the
	// client's and upstream's (this one's), [tunnel, intercepted].
	var proxyCPU, restCPU [2][]float64
	for range benchrow.Reps(5) {
		for i, intercepted := range []bool{false, true} {
			p := startProcProxy(b, r, phs)
			c := procClient(p.addr, 0, trust)
			procGet(b, c, host[intercepted]+"/v1/x", phs[0], -1) // the connections, once
			p0, s0 := p.mustCPU(b), selfCPU(b)
			procGet(b, c, host[intercepted]+"/big/104857600", phs[0], -1)
			proxyCPU[i] = append(proxyCPU[i], (p.mustCPU(b) - p0).Seconds())
			restCPU[i] = append(restCPU[i], (selfCPU(b) - s0).Seconds())
			c.CloseIdleConnections()
			p.stop()
		}
	}

	// The peak of the proxy's memory (VmHWM) while 100 agents each hold
	// a connection open after a request, 25 of them with a 16 MB download
	// begun and stalled (the client reading no more: every buffer on the
	// way full), then finished; a proxy process of its own each time.
	var hwm, rss [2][]float64
	for range benchrow.Reps(3) {
		for i, intercepted := range []bool{false, true} {
			p := startProcProxy(b, r, phs)
			var begun, requested, ended sync.WaitGroup
			release := make(chan struct{})
			clients := make([]*http.Client, procAgents)
			for a := range procAgents {
				clients[a] = procClient(p.addr, a, trust)
				requested.Add(1)
				ended.Add(1)
				if a < procStreams {
					begun.Add(1)
				}
				go func() {
					defer ended.Done()
					procGet(b, clients[a], host[intercepted]+"/v1/x", phs[a], -1)
					requested.Done()
					if a < procStreams {
						procGet(b, clients[a], host[intercepted]+"/big/16777216", phs[a], 1<<20, begun.Done, func() { <-release })
					}
				}()
			}
			requested.Wait()
			begun.Wait()
			m, err := p.status("VmRSS")
			if err != nil {
				b.Fatal(err)
			}
			rss[i] = append(rss[i], m)
			close(release)
			waitEnded(b, &ended)
			if m, err = p.status("VmHWM"); err != nil {
				b.Fatal(err)
			}
			hwm[i] = append(hwm[i], m)
			for _, c := range clients {
				c.CloseIdleConnections()
			}
			p.stop()
		}
	}

	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	rest, tunnel, in := med(append(append([]float64(nil), restCPU[0]...), restCPU[1]...)), med(proxyCPU[0]), med(proxyCPU[1])
	benchrow.Print(b, benchrow.Row{Group: "egress", What: "flock-proxy's CPU per 100 MB downloaded from a secret's host", Floor: "the same through a plain tunnel",
		Unit: "s", Flock: proxyCPU[1], Base: proxyCPU[0],
		Note: fmt.Sprintf("CPU seconds of the proxy's process (user+system); the client and the stand-in upstream took %.2f s together either way. "+
			"Where the three share the cores, a download through an intercepted host runs at most (%.2f+%.2f)/(%.2f+%.2f) = %.2fx a plain tunnel's, "+
			"and one connection's answer is carried by one goroutine (decrypt, scan, encrypt in turn): at most 100/%.2f = %.0f MB/s. "+
			"The difference is the proxy's second TLS: each record of the answer decrypted and encrypted again, read from the upstream one at a time; the scan for secrets is a small part of it",
			rest, rest, tunnel, rest, in, (rest+tunnel)/(rest+in), in, 100/in)})
	benchrow.Print(b, benchrow.Row{Group: "egress", What: fmt.Sprintf("flock-proxy's memory (VmHWM), %d agents intercepting at once", procAgents), Floor: "the same agents through plain tunnels",
		N: procAgents, Unit: "MiB", Flock: hwm[1], Base: hwm[0], Goal: "≤ 128 MiB",
		Note: fmt.Sprintf("the peak resident memory of the proxy's process, a fresh one for each figure: each agent (a uid, a placeholder of its own) holds a connection after a request, "+
			"%d of them with a 16 MB download begun and stalled, then finished; VmRSS with all of them open: %.1f MiB intercepting, %.1f MiB tunnels. "+
			"The process is the test binary serving the proxy alone (no gateway): Go's runtime and the proxy's code, not the clients or the upstream",
			procStreams, med(rss[1]), med(rss[0]))})
}

// procClient is agent i's HTTP/1.1 client through the proxy at addr,
// from its own address.
func procClient(addr string, i int, trust *x509.CertPool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: procAddr(i).AsSlice()}}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr}), DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: trust}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
}

// procGet GETs u with the placeholder ph as its Bearer token and reads
// the answer whole; after the first pause bytes of it (-1: none), it
// calls each of at in turn.
func procGet(b *testing.B, c *http.Client, u, ph string, pause int64, at ...func()) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %d", u, resp.StatusCode)
	}
	if pause >= 0 {
		if _, err := io.CopyN(io.Discard, resp.Body, pause); err != nil {
			b.Error(err)
		}
		for _, f := range at {
			f()
		}
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Error(err)
	}
}

// waitEnded waits for the agents' requests and downloads to end, or
// fails: a deadline keeps a stuck one from holding the run.
func waitEnded(b *testing.B, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatal("the agents' downloads did not end in 2 minutes")
	}
}

func (p *procProxy) mustCPU(b *testing.B) time.Duration {
	d, err := p.cpu()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
