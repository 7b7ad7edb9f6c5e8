package proxy

import (
	"bufio"
	"bytes"
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
		s.Gateway.Handoff(pc)
		return
	}
	s.handle(pc)
}

// peeked is a connection whose first bytes were read into r.
type peeked struct {
	net.Conn
	r *bufio.Reader
}

func (p *peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite half-closes the connection underneath, as a tunnel's end
// does (splice).
func (p *peeked) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
