package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"time"
)

// Handoff takes the connections that are not a CONNECT: the model
// gateway's (package gateway), which agents reach at the same address
// with plain HTTP requests (http://<listen>/<provider>/...).
type Handoff interface {
	Handoff(c net.Conn)
}

var connectMethod = []byte("CONNECT ")

// dispatch reads a connection's first bytes: a CONNECT is the proxy's,
// anything else the gateway's (when there is one). The bytes read stay
// in the connection handed on.
func (s *Server) dispatch(c net.Conn) {
	if s.Gateway == nil {
		s.handle(c)
		return
	}
	c.SetReadDeadline(time.Now().Add(s.timeout()))
	br := bufio.NewReaderSize(c, 4096)
	head, err := br.Peek(len(connectMethod))
	c.SetReadDeadline(time.Time{})
	pc := &peeked{Conn: c, r: br}
	if err == nil && !bytes.Equal(head, connectMethod) {
		if sc, ok := s.gatewayShare(pc); ok {
			s.Gateway.Handoff(sc)
		}
		return
	}
	s.handle(pc)
}

// gatewayShare holds a place in its agent's share of tunnels for a
// gateway connection while it is open (an SDK's pool keeps several): an
// agent granted a model may hold no more of the proxy's files than one
// tunnelling by name. Over the share the client gets a 429 at once, and
// the refusal is recorded as a tunnel's is. A uid that is no agent of the
// proxy's goes on to the gateway, which refuses it in its own words.
func (s *Server) gatewayShare(c *peeked) (net.Conn, bool) {
	uid, err := s.UIDs.UID(addrPort(c.RemoteAddr()), addrPort(c.LocalAddr()))
	if err != nil {
		// Refused here, not asked again by the gateway: a second lookup
		// could find another socket with the same four addresses.
		if s.Record != nil {
			s.Record(Record{Reason: ReasonNotAgent, Detail: err.Error()})
		}
		refuse(c, "403 Forbidden", "", "flock proxy: refused: the kernel could not say who owns this connection; only flock agents may call the model gateway")
		c.Close()
		return nil, false
	}
	a, ok := s.Policy().Agents[uid]
	if !ok {
		return c, true
	}
	release, n, ok := s.tunnels.Take(uid, a.Tunnels)
	if !ok {
		rec := Record{Agent: a.ID, UID: uid, Reason: ReasonTunnels, Detail: fmt.Sprintf("%d open, share %d (model gateway)", n, a.Tunnels)}
		if s.Record != nil {
			s.Record(rec)
		}
		refuse(c, "429 Too Many Requests", "Retry-After: 1\r\n", overTunnels(a, n)+"; close idle ones, or raise the share")
		c.Close()
		return nil, false
	}
	return &sharedConn{peeked: c, release: release, uid: uid}, true
}

// sharedConn gives its place in the agent's share back once closed, and
// tells the gateway whose it is (the kernel was asked once).
type sharedConn struct {
	*peeked
	release func()
	uid     uint32
}

// OwnerUID is the uid of the client's socket (gateway.Owned).
func (c *sharedConn) OwnerUID() uint32 { return c.uid }

func (c *sharedConn) Close() error {
	c.release()
	return c.peeked.Close()
}

// peeked is a connection whose first bytes were read into r.
type peeked struct {
	net.Conn
	r *bufio.Reader
}

func (p *peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite half-closes the connection underneath, as a tunnel's end
// does (carry).
func (p *peeked) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
