package probe

// An agent trying to crowd the services every agent shares: more bus
// connections, subscriptions, unread bytes, larger messages, tasks or
// proxy tunnels than its shares (spec shares). OK means it got beyond the
// share (a hole); an error is the refusal it met; ErrBeforeTheShare, that
// it was refused before it held anything, which proves no share.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/agent"
)

// ErrBeforeTheShare: the first attempt already failed, so the failure is
// no share's doing (the bus or proxy unreachable, a wall): it proves
// nothing, as a hang proves nothing.
var ErrBeforeTheShare = errors.New("refused before holding anything")

func shareOp(ctx context.Context, r Request) (string, error) {
	switch r.Op {
	case "nats-connections":
		return natsConnections(ctx, r)
	case "nats-subscriptions":
		return natsSubscriptions(ctx, r)
	case "nats-oversize":
		return natsOversize(ctx, r)
	case "nats-slow":
		return natsSlow(ctx, r)
	case "desk-send":
		return deskSend(ctx, r)
	case "proxy-flood":
		return proxyFlood(ctx, r)
	case "proxy-handshakes":
		return proxyHandshakes(ctx, r)
	}
	return "", fmt.Errorf("unknown op %q", r.Op)
}

// beyond is the error of a flood refused at attempt i (0-based) of n.
func beyond(i, n int, what string, err error) error {
	if i == 0 {
		return fmt.Errorf("%w: the first %s: %v", ErrBeforeTheShare, what, err)
	}
	return fmt.Errorf("%s %d of %d refused (%d held): %w", what, i+1, n, i, err)
}

// natsConnections opens Count connections as the agent and holds them
// all until the last is tried.
func natsConnections(ctx context.Context, r Request) (string, error) {
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := range r.Count {
		nc, _, err := natsConn(ctx, r.Addr, r.Path, false)
		if err != nil {
			return "", beyond(i, r.Count, "connection", err)
		}
		conns = append(conns, nc)
	}
	return fmt.Sprintf("held %d connections at once", len(conns)), nil
}

// natsSubscriptions subscribes Count times on one connection, to
// Name.<i>, and waits for the server's word on them.
func natsSubscriptions(ctx context.Context, r Request) (string, error) {
	nc, errs, err := natsConn(ctx, r.Addr, r.Path, false)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBeforeTheShare, err)
	}
	defer nc.Close()
	for i := range r.Count {
		if _, err := nc.SubscribeSync(r.Name + "." + strconv.Itoa(i)); err != nil {
			return "", beyond(i, r.Count, "subscription", err)
		}
	}
	if err := refused(ctx, nc, errs); err != nil {
		return "", fmt.Errorf("subscriptions on one connection refused beyond the first (of %d): %w", r.Count, err)
	}
	return fmt.Sprintf("held %d subscriptions on one connection", r.Count), nil
}

// rawNATS is a client that speaks the protocol itself as the agent
// (nats.go refuses an oversized message before sending it, and reads
// every message it is sent): connected, signed in, and past its first
// PONG.
func rawNATS(ctx context.Context, rawURL, seedPath string) (net.Conn, *bufio.Reader, error) {
	if rawURL == "" {
		rawURL = os.Getenv("NATS_URL")
	}
	if seedPath == "" {
		seedPath = os.Getenv("NATS_NKEY")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		return nil, nil, err
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	var info struct{ Nonce string }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("the server's INFO %q: %w", line, err)
	}
	sig, err := kp.Sign([]byte(info.Nonce))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	pub, _ := kp.PublicKey()
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"nkey\":%q,\"sig\":%q,\"protocol\":1}\r\nPING\r\n",
		pub, base64.RawURLEncoding.EncodeToString(sig))
	if err := pong(br); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, br, nil
}

// pong reads up to the next PONG; an -ERR before it is the refusal.
func pong(br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "PONG"):
			return nil
		case strings.HasPrefix(line, "-ERR"):
			return errors.New(strings.TrimSpace(line))
		}
	}
}

// natsOversize publishes one message of Size bytes on Name.
func natsOversize(ctx context.Context, r Request) (string, error) {
	c, br, err := rawNATS(ctx, r.Addr, r.Path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBeforeTheShare, err)
	}
	defer c.Close()
	fmt.Fprintf(c, "PUB %s %d\r\n", r.Name, r.Size)
	go func() { // the server may answer before it read the payload
		chunk := make([]byte, 64<<10)
		for left := r.Size; left > 0; left -= len(chunk) {
			if _, err := c.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\nPING\r\n")
	}()
	if err := pong(br); err != nil {
		return "", fmt.Errorf("a message of %d bytes: %w", r.Size, err)
	}
	return fmt.Sprintf("a message of %d bytes accepted", r.Size), nil
}

// natsSlow subscribes to Name and reads nothing for Count milliseconds,
// while others publish there; then it looks whether the bus still holds
// the connection (OK: it does, whatever it buffered for it).
func natsSlow(ctx context.Context, r Request) (string, error) {
	c, br, err := rawNATS(ctx, r.Addr, r.Path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBeforeTheShare, err)
	}
	defer c.Close()
	fmt.Fprintf(c, "SUB %s 1\r\nPING\r\n", r.Name)
	if err := pong(br); err != nil {
		return "", fmt.Errorf("%w: subscribing to %s: %v", ErrBeforeTheShare, r.Name, err)
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Duration(r.Count) * time.Millisecond):
	}
	// What the bus buffered is read now; a connection it cut ends.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := io.Copy(io.Discard, br)
	if err == nil {
		return "", fmt.Errorf("the bus closed the connection after %d unread bytes (a slow consumer)", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("still connected after %d ms unread (%d bytes buffered)", r.Count, n), nil
	}
	return "", fmt.Errorf("the connection ended after %d unread bytes: %v", n, err)
}

// deskSend sends Count tasks of Size bytes on Name through the desk, as
// the agent (AGENT_ID), until one is refused.
func deskSend(ctx context.Context, r Request) (string, error) {
	id, err := strconv.Atoi(os.Getenv("AGENT_ID"))
	if err != nil {
		return "", fmt.Errorf("%w: AGENT_ID: %v", ErrBeforeTheShare, err)
	}
	nc, _, err := natsConn(ctx, r.Addr, r.Path, false)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBeforeTheShare, err)
	}
	defer nc.Close()
	payload := make([]byte, r.Size)
	for i := range r.Count {
		if _, err := agent.SendTask(ctx, nc, id, r.Name, "", payload); err != nil {
			return "", beyond(i, r.Count, "task", err)
		}
	}
	return fmt.Sprintf("%d tasks of %d bytes stored", r.Count, r.Size), nil
}

// proxyFlood opens Count connections through $HTTPS_PROXY at once: with
// Data "carry", tunnels to Addr (TLS for Name inside); else handshakes
// that never finish their request (proxyHandshakes). A 403 is the
// proxy's refusal.
func proxyFlood(ctx context.Context, r Request) (string, error) {
	raw := os.Getenv("HTTPS_PROXY")
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return "", fmt.Errorf("%w: no usable HTTPS_PROXY (%q)", ErrBeforeTheShare, raw)
	}
	if r.Data != "carry" {
		return proxyHandshakes(ctx, Request{Addr: u.Host, Name: r.Addr, Count: r.Count})
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	var d net.Dialer
	for i := range r.Count {
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return "", beyond(i, r.Count, "connection to the proxy", err)
		}
		open = append(open, c)
		if _, err := tunnelThrough(ctx, c, r.Addr, r.Name); err != nil {
			return "", beyond(i, r.Count, "tunnel", err)
		}
	}
	return fmt.Sprintf("held %d connections through the proxy", len(open)), nil
}

// HandshakeWait is how long a flood of handshakes waits for the proxy's
// word once all are open: a refusal over the share comes at once, a held
// handshake hears nothing until the proxy's request deadline (10 s),
// which the wait must stay well within.
const HandshakeWait = 2 * time.Second

// proxyHandshakes holds Count connections to the proxy at Addr (empty:
// $HTTPS_PROXY's) open at once, each with a request that never ends
// ("CONNECT Name", no line end), made as uid Key (0: the process's own;
// root's control plays the agent with DialAs, as the proxy knows it by
// its socket's uid). Then it watches them all for HandshakeWait: any
// answer is a refusal (the proxy's 403 names the share); none, every
// handshake held.
func proxyHandshakes(ctx context.Context, r Request) (string, error) {
	addr := r.Addr
	if addr == "" {
		u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%w: no proxy address and no usable HTTPS_PROXY", ErrBeforeTheShare)
		}
		addr = u.Host
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range r.Count {
		c, err := dialProxy(ctx, r.Key, addr)
		if err == nil {
			_, err = io.WriteString(c, "CONNECT "+r.Name)
		}
		if err != nil {
			if c != nil {
				c.Close()
			}
			return "", beyond(i, r.Count, "connection to the proxy", err)
		}
		open = append(open, c)
	}
	answers := make(chan error, len(open))
	until := time.Now().Add(HandshakeWait)
	for _, c := range open {
		go func() { answers <- heard(c, until) }()
	}
	var refused []error
	for range open {
		if err := <-answers; err != nil {
			refused = append(refused, err)
		}
	}
	switch {
	case len(refused) == len(open):
		return "", fmt.Errorf("%w: all %d handshakes: %v", ErrBeforeTheShare, len(open), refused[0])
	case len(refused) > 0:
		return "", fmt.Errorf("%d of %d handshakes refused (%d held): %w", len(refused), len(open), len(open)-len(refused), refused[0])
	}
	return fmt.Sprintf("held %d handshakes through the proxy for %s", len(open), HandshakeWait), nil
}

// heard is the proxy's word on a handshake until then: nil if none (it
// is held), else its answer (or the connection's end) as the error.
func heard(c net.Conn, until time.Time) error {
	c.SetReadDeadline(until)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the proxy ended it unanswered: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// tunnelThrough is proxyConnect's CONNECT and TLS on an open connection
// to the proxy, leaving the tunnel open.
func tunnelThrough(ctx context.Context, c net.Conn, target, sni string) (string, error) {
	return connectOn(ctx, c, target, sni, false)
}
