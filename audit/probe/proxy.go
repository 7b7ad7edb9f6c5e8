package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// proxyConnect is what an HTTPS client does through $HTTPS_PROXY: CONNECT
// target, then TLS with sni (no certificate check: the proxy is under
// test, not PKI), then GET /. Detail is the first line of the body; a
// refusal is the proxy's status and body.
func proxyConnect(ctx context.Context, target, sni string) (string, error) {
	addr, err := proxyAddr(os.Getenv)
	if err != nil {
		return "", err
	}
	c, err := dialProxy(ctx, 0, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return connectOn(ctx, c, target, sni, true)
}

// proxyAddr is the host:port of the proxy in HTTPS_PROXY, as env has it.
func proxyAddr(env func(string) string) (string, error) {
	raw := env("HTTPS_PROXY")
	if raw == "" {
		return "", errors.New("no HTTPS_PROXY in the environment")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("HTTPS_PROXY %q: not a proxy's URL (%v)", raw, err)
	}
	return u.Host, nil
}

// dialProxy connects to the proxy at addr as uid (0: the process's own;
// root's control plays an agent with DialAs, as the proxy knows an agent
// by its socket's uid).
func dialProxy(ctx context.Context, uid int, addr string) (net.Conn, error) {
	if uid > 0 {
		return DialAs(ctx, uid, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// connectOn is CONNECT target and TLS with sni on c, a connection to the
// proxy; with get, then GET / and the first line of the body. Without, the
// tunnel is left open.
func connectOn(ctx context.Context, c net.Conn, target, sni string, get bool) (string, error) {
	tc, err := tunnel(ctx, c, target, sni)
	if err != nil {
		return "", err
	}
	if !get {
		return "tunnel open", nil
	}
	fmt.Fprintf(tc, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", sni)
	r, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", fmt.Errorf("GET through the tunnel: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1024))
	return strings.SplitN(string(b), "\n", 2)[0], nil
}

// tunnel is CONNECT target and TLS with sni (HTTP/1.1: no ALPN) on c. A
// CONNECT refused is an *connectError.
func tunnel(ctx context.Context, c net.Conn, target, sni string) (*tls.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, fmt.Errorf("reading the proxy's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, &connectError{Status: resp.Status, Body: strings.TrimSpace(string(b))}
	}
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS through the tunnel: %w", err)
	}
	return tc, nil
}

// connectError is the proxy's refusal of a CONNECT: its status and body.
type connectError struct{ Status, Body string }

func (e *connectError) Error() string { return e.Status + ": " + e.Body }

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
