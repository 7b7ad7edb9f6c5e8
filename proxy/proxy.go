// Package proxy is flock's egress proxy: an HTTP CONNECT forward proxy on
// loopback that carries an agent's TLS connections to the names its spec
// allows. It knows each client by the uid the kernel says owns the
// client's socket (sock_diag), never by anything the client sends.
package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockrun/flock/spec"
)

// UIDOf says which uid owns the TCP socket local -> remote (SockDiag).
type UIDOf interface {
	UID(local, remote netip.AddrPort) (uint32, error)
}

// Resolver resolves names (net.DefaultResolver; a fake in tests).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Server is the proxy. Set Policy before Serve; SetPolicy replaces it for
// new connections while open tunnels go on.
type Server struct {
	UIDs     UIDOf
	Resolver Resolver
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	Record   func(Record) // every decision; nil: none
	Timeout  time.Duration
	// Idle closes a tunnel that carried nothing either way for so long
	// (0: spec.ProxyIdle; negative: never, the benchmarks' floor).
	Idle time.Duration
	// Local says whether an address is this host's, which a wide address
	// rule does not cover (nil: LocalAddr, the host's interfaces).
	Local func(netip.Addr) bool
	// Gateway takes every connection that is not a CONNECT (nil: they
	// are refused as the proxy's).
	Gateway Handoff
	// Roots verify the upstreams of the hosts intercepted for secrets
	// (nil: the system's roots, as in production; a test's CA in tests).
	Roots *x509.CertPool

	policy atomic.Pointer[Policy]
	wg     sync.WaitGroup
	// Each agent's connections open (tunnels) and those of them not yet
	// carrying (handshakes), against its shares.
	tunnels, handshakes Share
	// The secrets of the connections accepted from now on, and what was
	// done with them (intercept.go).
	intercept    atomic.Pointer[Intercept]
	secretCounts secretTally
}

// SetPolicy makes p the policy of every connection accepted from now on.
func (s *Server) SetPolicy(p Policy) { s.policy.Store(&p) }

// Policy is the policy in force.
func (s *Server) Policy() Policy {
	if p := s.policy.Load(); p != nil {
		return *p
	}
	return Policy{}
}

// Serve accepts connections on ln until it is closed.
func (s *Server) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			s.wg.Wait()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.dispatch(c)
		}()
	}
}

func (s *Server) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 10 * time.Second
}

// handle runs one client connection: who it is, what it asks, and either a
// one-line 403 or a tunnel.
func (s *Server) handle(c net.Conn) {
	defer c.Close()
	start := time.Now()
	rec := Record{Agent: 0}
	defer func() {
		rec.Duration = time.Since(start)
		if s.Record != nil {
			s.Record(rec)
		}
	}()
	pol := s.Policy()

	// The client's socket is the remote end, seen from its side.
	uid, err := s.UIDs.UID(addrPort(c.RemoteAddr()), addrPort(c.LocalAddr()))
	if err != nil {
		rec.Reason, rec.Detail = ReasonNotAgent, err.Error()
		deny(c, "flock proxy: refused: the kernel could not say who owns this connection; only flock agents may use this proxy")
		return
	}
	rec.UID = uid
	a, ok := pol.Agents[uid]
	if !ok {
		rec.Reason = ReasonNotAgent
		deny(c, fmt.Sprintf("flock proxy: refused: uid %d is not an agent with names in its egress", uid))
		return
	}
	rec.Agent = a.ID
	done, ok := s.share(c, &rec, a)
	if !ok {
		return
	}
	defer done.tunnel()
	defer done.handshake()

	c.SetDeadline(time.Now().Add(s.timeout()))
	// The request is capped (textproto would grow a line without end);
	// the tunnel is not.
	cr := &capReader{r: c, left: maxRequest}
	br := bufio.NewReaderSize(cr, 4096)
	req, err := http.ReadRequest(br)
	cr.left = -1
	if err != nil {
		rec.Reason, rec.Detail = ReasonNotConnect, "unreadable request"
		deny(c, fmt.Sprintf("flock proxy: agent %d: refused: not an HTTP request", rec.Agent))
		return
	}
	if req.Method != http.MethodConnect {
		rec.Reason, rec.Detail = ReasonNotConnect, req.Method
		deny(c, fmt.Sprintf("flock proxy: agent %d: refused: %s %s: only HTTPS is carried (CONNECT); plain HTTP cannot be checked by name", rec.Agent, req.Method, oneLine(req.Host)))
		return
	}
	t, err := ParseTarget(req.Host)
	if err != nil {
		rec.Reason, rec.Detail = ReasonBadTarget, err.Error()
		deny(c, fmt.Sprintf("flock proxy: agent %d: refused: CONNECT %s", rec.Agent, oneLine(err.Error())))
		return
	}
	rec.Name, rec.Port = t.Host, t.Port
	local := s.Local
	if local == nil {
		local = LocalAddrs()
	}
	d := pol.Decide(uid, t, local)
	if !d.Allow {
		rec.Reason = d.Reason
		deny(c, denial(rec.Agent, t, d.Reason))
		return
	}

	addrs := []netip.Addr{t.Addr}
	if !t.Addr.IsValid() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
		resolved, err := s.Resolver.LookupNetIP(ctx, "ip", t.Host)
		cancel()
		if err != nil || len(resolved) == 0 {
			rec.Reason, rec.Detail = ReasonNoAddress, fmt.Sprint(err)
			deny(c, fmt.Sprintf("flock proxy: agent %d: refused: %s: the name does not resolve", rec.Agent, t))
			return
		}
		addrs = pol.Addrs(uid, resolved, t.Port, local)
		if len(addrs) == 0 {
			// Go's resolver answers IPv4 as ::ffff:a.b.c.d from /etc/hosts.
			rec.Reason, rec.Addr = ReasonPrivateAddr, resolved[0].Unmap()
			deny(c, denial(rec.Agent, t, ReasonPrivateAddr)+" (it resolves to "+rec.Addr.String()+")")
			return
		}
	}
	rec.Addr = addrs[0]

	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Reason, rec.Detail = ReasonDialFailed, "client gone"
		return
	}
	// The tunnel is open: the client's first bytes must be a ClientHello
	// for the very name it asked for.
	hello := []byte(nil)
	if !t.Addr.IsValid() {
		sni, read, err := readSNI(br)
		hello = read
		if err != nil {
			rec.Reason, rec.Detail = ReasonNotTLS, err.Error()
			return
		}
		if !strings.EqualFold(sni, t.Host) {
			rec.Reason, rec.Detail = ReasonSNIMismatch, "sni "+oneLine(sni)
			return
		}
	}
	if ca, b, ok := s.bound(uid, t); ok {
		s.serveSecrets(c, io.MultiReader(bytes.NewReader(hello), br), &rec, t, addrs, ca, b, done.handshake)
		return
	}
	c.SetDeadline(time.Time{})

	var up net.Conn
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
		up, err = s.dial(ctx, netip.AddrPortFrom(a, t.Port).String())
		cancel()
		if err == nil {
			rec.Addr = a
			break
		}
	}
	if up == nil {
		rec.Reason, rec.Detail = ReasonDialFailed, err.Error()
		return
	}
	defer up.Close()
	done.handshake() // carrying now
	rec.Reason = ReasonAllowed
	if _, err := up.Write(hello); err != nil {
		return
	}
	rec.BytesUp = int64(len(hello))
	var idle bool
	rec.BytesUp, rec.BytesDown, idle = carry(c, br, up, rec.BytesUp, s.idle())
	if idle {
		rec.Detail = fmt.Sprintf("closed after %s carrying nothing", s.idle())
	}
}

func (s *Server) idle() time.Duration {
	if s.Idle != 0 {
		return s.Idle
	}
	return spec.ProxyIdle
}

// held are the releases of a connection's places in its agent's shares.
type held struct{ tunnel, handshake func() }

// share takes a place for a new connection of agent a in its tunnels and
// its handshakes, or refuses it at once, saying which share it is over.
func (s *Server) share(c net.Conn, rec *Record, a AgentRules) (held, bool) {
	tunnel, n, ok := s.tunnels.Take(rec.UID, a.Tunnels)
	if !ok {
		rec.Reason, rec.Detail = ReasonTunnels, fmt.Sprintf("%d open, share %d", n, a.Tunnels)
		deny(c, overTunnels(a, n))
		return held{}, false
	}
	handshake, n, ok := s.handshakes.Take(rec.UID, a.Handshakes)
	if !ok {
		tunnel()
		rec.Reason, rec.Detail = ReasonHandshakes, fmt.Sprintf("%d in flight, share %d", n, a.Handshakes)
		deny(c, fmt.Sprintf("flock proxy: agent %d: refused: it has %d connections through the proxy not yet carrying, its share is %d (agents[id=%d].shares.handshakes)", a.ID, n, a.Handshakes, a.ID))
		return held{}, false
	}
	return held{tunnel, handshake}, true
}

// maxRequest bounds a CONNECT request with its headers.
const maxRequest = 16 << 10

// capReader reads at most left bytes of r, then fails; left < 0: no cap.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, errors.New("request too large")
	}
	if c.left > 0 && int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	if c.left > 0 {
		c.left -= int64(n)
	}
	return n, err
}

func (s *Server) dial(ctx context.Context, addr string) (net.Conn, error) {
	if s.Dial != nil {
		return s.Dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// carry copies both ways until both are done, or until idle passes with
// nothing carried either way (then both are closed); up counts what is
// already sent upstream. The client's buffered bytes go first. A
// tunnel's quiet is asked of the kernel (quiet), not counted here.
//
// The copies go through user space, 32 KiB at a time each way, never
// splice(2), which io.Copy takes between two TCP sockets: splice holds a
// pipe each way for the tunnel's life, four files beyond the two a
// tunnel is counted for (spec.FilesPerTunnel), and on loopback it is no
// cheaper. 100 MB downloads on 2 cores, six runs of 30 each alternating
// with as many direct: spliced, 1.13-1.23x direct's CPU and a median of
// 0.91-1.05x its speed (slowest tenth 0.73-0.85x); copied, 1.15-1.24x
// and 1.01-1.08x (0.79-0.94x). Spliced, the agent reads the upstream's
// pages where they lie, cold (its copy out of the socket cost about 1.8x
// under perf); copied, the proxy's, just written. Beside the gateway, as
// flock-proxy runs, the copies never spliced anyway: dispatch's reader
// hides the socket from io.Copy.
func carry(c net.Conn, br *bufio.Reader, up net.Conn, sent int64, idle time.Duration) (int64, int64, bool) {
	var down int64
	done := make(chan struct{})
	go func() {
		down, _ = io.CopyBuffer(writer{c}, reader{up}, make([]byte, 32<<10))
		closeWrite(c)
		close(done)
	}()
	stop := make(chan struct{})
	var idled atomic.Bool
	if idle > 0 {
		go watchIdle(socket(c), up, idle, stop, &idled)
	}
	n, _ := io.CopyBuffer(writer{up}, reader{br}, make([]byte, 32<<10))
	closeWrite(up)
	<-done
	close(stop)
	return sent + n, down, idled.Load()
}

// reader and writer hide a connection's io.ReaderFrom and io.WriterTo
// from io.Copy (carry).
type (
	reader struct{ io.Reader }
	writer struct{ io.Writer }
)

// socket is the connection under c's reader when dispatch read its first
// bytes (peeked, beside the gateway): the kernel's TCP_INFO is asked of
// it, which the wrapper hides (the idle watch never closed a tunnel of
// flock-proxy's, which always has its gateway).
func socket(c net.Conn) net.Conn {
	if p, ok := c.(*peeked); ok {
		return p.Conn
	}
	return c
}

// watchIdle closes both ends of a tunnel once neither carried data for
// idle, until stop.
func watchIdle(c, up net.Conn, idle time.Duration, stop <-chan struct{}, idled *atomic.Bool) {
	t := time.NewTicker(max(idle/8, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			qc, ok1 := quiet(c)
			qu, ok2 := quiet(up)
			if ok1 && ok2 && min(qc, qu) > idle {
				idled.Store(true)
				c.Close()
				up.Close()
				return
			}
		}
	}
}

func closeWrite(c net.Conn) {
	if t, ok := c.(interface{ CloseWrite() error }); ok {
		t.CloseWrite()
	}
}

// denial is the one line a refused CONNECT is told: the agent, the target
// and what in the spec would allow it.
func denial(agent int, t Target, reason string) string {
	switch reason {
	case ReasonIPLiteral:
		return fmt.Sprintf("flock proxy: agent %d: refused: CONNECT %s: an address, not a name; add %s to agents[id=%d].egress, or connect by name", agent, t, t, agent)
	case ReasonPrivateAddr:
		return fmt.Sprintf("flock proxy: agent %d: refused: CONNECT %s: the name resolves into this host's or a private network; add that address to agents[id=%d].egress if it is meant", agent, t, agent)
	default:
		return fmt.Sprintf("flock proxy: agent %d: refused: CONNECT %s: not in its egress; add %q to agents[id=%d].egress", agent, t, t.String(), agent)
	}
}

// deny answers 403 with one line and closes: the client fails at once,
// and says why.
func deny(c net.Conn, line string) { refuse(c, "403 Forbidden", "", line) }

// refuse answers c with status, the extra header lines (each ending in
// CRLF) and one line, and asks the client to close.
func refuse(c net.Conn, status, extra, line string) {
	body := line + "\n"
	c.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "HTTP/1.1 "+status+"\r\nContent-Type: text/plain; charset=utf-8\r\n"+extra+"Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
}

// overTunnels is the line refusing agent a a connection beyond its share
// of tunnels, n of them open.
func overTunnels(a AgentRules, n int) string {
	return fmt.Sprintf("flock proxy: agent %d: refused: it has %d connections through the proxy open, its share is %d (agents[id=%d].shares.tunnels)", a.ID, n, a.Tunnels, a.ID)
}

// oneLine keeps what the client sent printable and short in a line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// HostAddrs are this host's own addresses now (its interfaces', as the
// kernel lists them), unmapped.
func HostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	return out, nil
}

// LocalAddrs says whether an address is one of this host's (HostAddrs,
// read at the first question and kept for one connection's decisions; a
// CONNECT refused by name never reads them). If they cannot be read,
// every address is taken for this host's: a wide rule then covers nothing.
func LocalAddrs() func(netip.Addr) bool {
	own := sync.OnceValues(func() (map[netip.Addr]bool, error) {
		addrs, err := HostAddrs()
		set := make(map[netip.Addr]bool, len(addrs))
		for _, a := range addrs {
			set[a] = true
		}
		return set, err
	})
	return func(a netip.Addr) bool {
		set, err := own()
		return err != nil || set[a.Unmap()]
	}
}
