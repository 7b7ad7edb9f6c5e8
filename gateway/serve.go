package gateway

import (
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener is the gateway's side of flock-proxy's listener: the proxy
// hands it each connection that is not a CONNECT (proxy.Handoff), and
// the gateway's HTTP server accepts them from it.
type Listener struct {
	addr  net.Addr // the proxy's, for the server's logs
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewListener is a Listener for connections to addr.
func NewListener(addr net.Addr) *Listener {
	return &Listener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Handoff gives c to the server, or closes it once the listener is
// closed.
func (l *Listener) Handoff(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *Listener) Addr() net.Addr { return l.addr }

// Server is the gateway's HTTP server on l: it knows each connection's
// agent from the kernel once (ConnContext), bounds what a client may
// hold open, and leaves answers unbounded in time (a model writes for
// minutes).
func (g *Gateway) Server() *http.Server {
	return &http.Server{
		Handler:           g,
		ConnContext:       g.ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(logWriter{g}, "", 0),
	}
}

// Shutdown stops srv, letting answers under way finish for up to d, then
// closes the connections still open: their exchanges end cut, and are
// counted as such (Drain waits for that).
func Shutdown(srv *http.Server, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		err = srv.Close()
	}
	return err
}

// Drain waits up to d for the requests under way to end and be counted,
// and says whether they did. A request still under way when the proxy
// exits is counted at what it reserved when the store is opened again.
func (g *Gateway) Drain(d time.Duration) bool {
	done := make(chan struct{})
	go func() { g.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

type logWriter struct{ g *Gateway }

func (w logWriter) Write(p []byte) (int, error) {
	w.g.logf("gateway: %s", p)
	return len(p), nil
}
