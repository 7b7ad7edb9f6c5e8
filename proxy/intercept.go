package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockrun/flock/secrets"
)

// Intercept is what the proxy needs to carry the spec's secrets: the
// flock's CA, whose leaves it shows the agents, and each agent's
// bindings by uid (the secrets it is granted, their values and its
// placeholders). A CONNECT from an agent to a host one of its secrets is
// bound to is terminated here; every other CONNECT is a plain tunnel.
type Intercept struct {
	CA     *secrets.CA
	Agents map[uint32]secrets.Bindings
}

// SetIntercept makes i the secrets from now on: which connections are
// intercepted, and the bindings each request is swapped with, on a
// connection open before it too (a rotated secret is sent at once).
func (s *Server) SetIntercept(i Intercept) { s.intercept.Store(&i) }

// bound is uid's bindings if one of them is bound to t, a name (an
// address is never intercepted: the spec binds secrets to names).
func (s *Server) bound(uid uint32, t Target) (*secrets.CA, secrets.Bindings, bool) {
	ic := s.intercept.Load()
	if ic == nil || ic.CA == nil || t.Addr.IsValid() {
		return nil, nil, false
	}
	b := ic.Agents[uid]
	for _, x := range b {
		if x.Hosts[t.String()] {
			return ic.CA, b, true
		}
	}
	return nil, nil, false
}

// roots are what the upstreams of intercepted hosts are verified
// against: Roots, or the system's.
func (s *Server) roots() (*x509.CertPool, error) {
	if s.Roots != nil {
		return s.Roots, nil
	}
	p, err := systemRoots()
	if err != nil {
		return nil, fmt.Errorf("the system's roots: %w", err)
	}
	return p, nil
}

// systemRoots are the system's, read once: x509.SystemCertPool copies
// the whole pool at each call, which each intercepted connection would
// pay for. A pool only read is shared safely.
var systemRoots = sync.OnceValues(x509.SystemCertPool)

// Limits of an intercepted connection's requests: headers are bounded
// (a body is not: a git push may be large).
const (
	maxSecretHeaders = 64 << 10
	// upstreamConns bounds the connections one intercepted connection
	// opens upstream: one, but for an HTTP/2 client's streams toward an
	// upstream that speaks HTTP/1.1 only.
	upstreamConns = 4
)

// serveSecrets carries an agent's connection to t, a host one of its
// secrets is bound to, already answered 200 and its ClientHello (hello,
// then br) checked for t's name: TLS is terminated with the CA's leaf
// for t, and each request goes upstream with its placeholders swapped
// (package secrets), over TLS verified against the system's roots, to
// the addresses the policy allowed. Its place in the agent's
// handshakes is given back once the agent's handshake is done.
func (s *Server) serveSecrets(c net.Conn, r io.Reader, rec *Record, t Target, addrs []netip.Addr, ca *secrets.CA, b secrets.Bindings, handshakeDone func()) {
	leaf, err := ca.Leaf(t.Host)
	if err != nil {
		rec.Reason, rec.Detail = ReasonNotTLS, err.Error()
		return
	}
	roots, err := s.roots()
	if err != nil {
		rec.Reason, rec.Detail = ReasonDialFailed, err.Error()
		return
	}
	cc := &countedConn{Conn: c, r: r}
	tc := tls.Server(cc, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		rec.Reason, rec.Detail = ReasonNotTLS, "the agent's handshake with the flock's CA: "+err.Error()
		rec.BytesUp, rec.BytesDown = cc.up.Load(), cc.down.Load()
		return
	}
	c.SetDeadline(time.Time{})
	handshakeDone()
	rec.Reason = ReasonAllowed

	in := s.newInterception(rec, t, addrs, roots, b, cc)
	defer in.tr.CloseIdleConnections()
	ln := &oneConn{c: tc, done: make(chan struct{})}
	// A server of its own, whose handler is this connection's: one
	// connection's state, no registry to find it by.
	srv := &http.Server{
		Handler:           in,
		ReadHeaderTimeout: s.timeout(),
		IdleTimeout:       max(s.idle(), 0),
		MaxHeaderBytes:    maxSecretHeaders,
		ErrorLog:          discardLog,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.close()
			}
		},
	}
	srv.Serve(ln)
	in.wait()
	rec.BytesUp, rec.BytesDown = cc.up.Load(), cc.down.Load()
	rec.Detail = in.summary()
}

// oneConn is a listener of one connection: Accept hands it out once,
// then waits for it to close.
type oneConn struct {
	c     net.Conn
	taken atomic.Bool
	once  sync.Once
	done  chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	if !l.taken.Swap(true) {
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) close()         { l.once.Do(func() { close(l.done) }) }
func (l *oneConn) Close() error   { l.close(); return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }
