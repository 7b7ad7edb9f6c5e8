package proxy

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// countedConn is the agent's side of an intercepted connection, under
// its TLS: it reads r (the client's bytes, the ClientHello first) and
// writes the connection, counting both ways. Between hold and release
// the records written are gathered and sent at release, in one write:
// the TLS of a large answer's write is a record per 16 KiB, and a
// system call per record costs a download through the proxy more than
// the records' encryption.
type countedConn struct {
	net.Conn
	r        io.Reader
	up, down atomic.Int64

	mu      sync.Mutex // held while writing: the records go in order
	holding bool
	held    *[]byte
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.up.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	c.down.Add(int64(n))
	return n, err
}

// heldPool are the buffers of the records held: a large write's (a read
// buffer's, answerBufSize) with room for their headers and tags.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, answerBufSize+answerBufSize/16); return &b }}

func (c *countedConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding, c.held = true, heldPool.Get().(*[]byte)
}

// release writes what was held.
func (c *countedConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.Conn.Write(*c.held)
	c.down.Add(int64(n))
	*c.held = (*c.held)[:0]
	heldPool.Put(c.held)
	c.holding, c.held = false, nil
	return err
}

// recordsAtOnce is an HTTP/1.1 answer's writer on c: a write of more
// than a record goes to the agent in one system call.
type recordsAtOnce struct {
	http.ResponseWriter
	c *countedConn
}

// maxRecord is the most a TLS record carries.
const maxRecord = 16 << 10

func (w recordsAtOnce) Write(p []byte) (n int, err error) {
	if len(p) <= maxRecord {
		return w.ResponseWriter.Write(p)
	}
	w.c.hold()
	defer func() {
		if rerr := w.c.release(); err == nil && rerr != nil {
			n, err = 0, rerr
		}
	}()
	return w.ResponseWriter.Write(p)
}

// Unwrap is the ResponseWriter under it (its flushes, a WebSocket's
// hijack).
func (w recordsAtOnce) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answerBufSize is the buffer an answer's body is read into and written
// from: four records at once.
const answerBufSize = 64 << 10

// answerBufs are those buffers, shared by every interception.
type answerBufs struct{}

var answerPool = sync.Pool{New: func() any { return new([answerBufSize]byte) }}

func (answerBufs) Get() []byte  { return answerPool.Get().(*[answerBufSize]byte)[:] }
func (answerBufs) Put(b []byte) { answerPool.Put((*[answerBufSize]byte)(b)) }
