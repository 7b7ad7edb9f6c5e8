package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// maxHello bounds what the proxy reads before it has a ClientHello: a
// ClientHello fits in one 16 KiB record in practice (post-quantum key
// shares included); a client sending more is refused.
const maxHello = 64 << 10

var errGotHello = errors.New("client hello read")

// readSNI reads the client's first TLS ClientHello from r (no interception:
// nothing is written to the client) and returns the server name it asks
// for, and every byte read, which the proxy forwards upstream unchanged.
// The parsing is crypto/tls's own (fuzzed upstream), fed through a conn
// that can only be read. Anything that is not a ClientHello, truncated,
// or larger than maxHello is an error.
func readSNI(r io.Reader) (sni string, read []byte, err error) {
	var buf bytes.Buffer
	lr := &io.LimitedReader{R: r, N: maxHello}
	c := &readOnlyConn{r: io.TeeReader(lr, &buf)}
	err = tls.Server(c, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, errGotHello
		},
	}).Handshake()
	if !errors.Is(err, errGotHello) {
		if lr.N == 0 {
			return "", buf.Bytes(), errors.New("no ClientHello in the first 64 KiB")
		}
		return "", buf.Bytes(), errors.New("not a TLS ClientHello: " + err.Error())
	}
	for _, c := range sni {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", buf.Bytes(), errors.New("the ClientHello's server name is not a host name")
		}
	}
	return sni, buf.Bytes(), nil
}

// readOnlyConn is a net.Conn that reads r and refuses to write (the TLS
// server's alerts go nowhere: the client sees the proxy close instead).
type readOnlyConn struct{ r io.Reader }

func (c *readOnlyConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return nil }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
