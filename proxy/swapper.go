package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockrun/flock/secrets"
)

// interception is one intercepted connection's requests: who sent them,
// where they go, the secrets they may carry, and the transport that
// carries them upstream. The transport is the connection's own: the
// addresses it dials are those the policy allowed this agent (another
// agent's address rules may differ), and it closes with it.
type interception struct {
	s     *Server
	agent int
	uid   uint32
	t     Target
	b     secrets.Bindings
	tr    *http.Transport
	rp    *httputil.ReverseProxy
	cc    *countedConn // the agent's side

	mu       sync.Mutex
	closing  bool
	handlers sync.WaitGroup

	requests, carried, refused atomic.Int64
}

var discardLog = log.New(io.Discard, "", 0)

// bindingsKey is the context key of the bindings a request was swapped
// with, which its answer is swapped back with.
type bindingsKey struct{}

func bindingsOf(ctx context.Context) secrets.Bindings {
	b, _ := ctx.Value(bindingsKey{}).(secrets.Bindings)
	return b
}

func (s *Server) newInterception(rec *Record, t Target, addrs []netip.Addr, roots *x509.CertPool, b secrets.Bindings, cc *countedConn) *interception {
	in := &interception{s: s, agent: rec.Agent, uid: rec.UID, t: t, b: b, cc: cc}
	in.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			err := errors.New("no address")
			for _, a := range addrs {
				var c net.Conn
				if c, err = s.dial(ctx, netip.AddrPortFrom(a, t.Port).String()); err == nil {
					return c, nil
				}
			}
			return nil, err
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, ServerName: t.Host, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxConnsPerHost:       upstreamConns,
		MaxIdleConnsPerHost:   upstreamConns,
		IdleConnTimeout:       max(s.idle(), 0),
		TLSHandshakeTimeout:   s.timeout(),
		ExpectContinueTimeout: time.Second,
	}
	in.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", t.String()
			// The transport asks for gzip and reads the answer decoded,
			// so that a secret echoed in it is found (Unswap); the agent
			// gets it plain.
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:      in.tr,
		BufferPool:     answerBufs{},
		ModifyResponse: in.unswap,
		ErrorHandler:   in.upstreamFailed,
		ErrorLog:       discardLog,
	}
	return in
}

// ServeHTTP swaps the request's placeholders and carries it upstream, or
// refuses it.
func (in *interception) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !in.enter() {
		return
	}
	defer in.handlers.Done()
	in.requests.Add(1)
	if line := in.misdirected(r); line != "" {
		answer(w, http.StatusMisdirectedRequest, line)
		return
	}
	// The bindings in force now, not those the connection was opened
	// with: a secret rotated since is sent at once. A host no longer
	// bound is a 421, which clients answer with a new connection (a
	// plain tunnel now).
	_, b, ok := in.s.bound(in.uid, in.t)
	if !ok {
		answer(w, http.StatusMisdirectedRequest, fmt.Sprintf("flock proxy: agent %d: %s is no longer bound to a secret of the agent's; open a new connection", in.agent, in.t))
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), bindingsKey{}, b))
	out, err := secrets.Swap(r, b, in.t.String())
	if ref := (*secrets.Refusal)(nil); errors.As(err, &ref) {
		in.refuse(w, ref)
		return
	} else if err != nil {
		answer(w, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d: refused: %v", in.agent, err))
		return
	}
	if carried := append(out.Swapped, out.Injected...); len(carried) > 0 {
		in.carried.Add(1)
		for _, name := range carried {
			in.s.secretCounts.swapped(in.agent, name)
		}
	}
	if r.ProtoMajor == 1 { // HTTP/2's frames are written one by one
		w = recordsAtOnce{w, in.cc}
	}
	in.rp.ServeHTTP(w, r)
}

// misdirected says why r is not for the host the connection was opened
// to ("": it is): a Host another name would send the secret to whoever
// serves that name behind the same address.
func (in *interception) misdirected(r *http.Request) string {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if strings.EqualFold(host, in.t.Host) && (port == "" || port == strconv.Itoa(int(in.t.Port))) {
		return ""
	}
	return fmt.Sprintf("flock proxy: agent %d: refused: a request for %s on a connection to %s; open a connection to that host", in.agent, oneLine(r.Host), in.t)
}

// refuse answers 403 naming the secret, the host and the rule (never the
// secret's value), and counts and records it.
func (in *interception) refuse(w http.ResponseWriter, ref *secrets.Refusal) {
	in.refused.Add(1)
	reason, fix := ReasonSecretRule, fmt.Sprintf(" (secrets[name=%s].rules)", ref.Secret)
	if errors.Is(ref, secrets.ErrUnboundHost) {
		reason, fix = ReasonSecretUnbound, fmt.Sprintf(" (secrets[name=%s].hosts)", ref.Secret)
	}
	in.s.secretCounts.refusedOne(in.agent, ref.Secret, reason)
	if in.s.Record != nil {
		in.s.Record(Record{Agent: in.agent, UID: in.uid, Name: in.t.Host, Port: in.t.Port, Reason: reason, Detail: ref.Error()})
	}
	answer(w, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d: refused: %s%s", in.agent, ref.Error(), fix))
}

// unswap gives the agent the answer with each secret back as its
// placeholder: in the headers, the body (as it streams) and the
// trailers. A protocol switched to (a WebSocket) is carried as it is.
func (in *interception) unswap(res *http.Response) error {
	b := bindingsOf(res.Request.Context())
	secrets.UnswapHeader(res.Header, b)
	if res.StatusCode != http.StatusSwitchingProtocols && res.Body != nil {
		res.Body = &unswapped{Reader: secrets.Unswap(res.Body, b), body: res.Body, res: res, b: b,
			full: res.ContentLength >= fullReadsFrom}
	}
	return nil
}

// unswapped is an answer's body read through Unswap; closed, its
// trailers (known once it is read) are unswapped too. A large answer of
// a known length (a download, not an event stream) is read a buffer
// full at a time: each read of the upstream's TLS is one record, and
// the agent's writes would be too.
type unswapped struct {
	io.Reader
	body io.Closer
	res  *http.Response
	b    secrets.Bindings
	full bool
}

// fullReadsFrom is the length from which an answer is read a buffer full
// at a time.
const fullReadsFrom = 1 << 20

func (u *unswapped) Read(p []byte) (int, error) {
	if !u.full {
		return u.Reader.Read(p)
	}
	n := 0
	for n < len(p) {
		m, err := u.Reader.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (u *unswapped) Close() error {
	err := u.body.Close()
	secrets.UnswapHeader(u.res.Trailer, u.b)
	return err
}

// upstreamFailed answers 502 saying why, with any secret in the error
// put back as its placeholder.
func (in *interception) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	h := http.Header{"E": {err.Error()}}
	secrets.UnswapHeader(h, bindingsOf(r.Context()))
	answer(w, http.StatusBadGateway, fmt.Sprintf("flock proxy: agent %d: %s: %s", in.agent, in.t, oneLine(h.Get("E"))))
}

// enter counts a handler in, unless the connection is done.
func (in *interception) enter() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closing {
		return false
	}
	in.handlers.Add(1)
	return true
}

// wait lets no handler in and waits for those running (an HTTP/2
// connection's may outlive it; a WebSocket's runs past its hijack).
func (in *interception) wait() {
	in.mu.Lock()
	in.closing = true
	in.mu.Unlock()
	in.handlers.Wait()
}

// summary is the connection's record's detail.
func (in *interception) summary() string {
	names := make([]string, len(in.b))
	for i, x := range in.b {
		names[i] = x.Name
	}
	return fmt.Sprintf("intercepted for secrets %s: %d requests, %d carrying a secret, %d refused",
		strings.Join(names, ", "), in.requests.Load(), in.carried.Load(), in.refused.Load())
}

// answer is a one-line answer of the proxy's own.
func answer(w http.ResponseWriter, status int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, line+"\n")
}
