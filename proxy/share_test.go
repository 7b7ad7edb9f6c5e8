package proxy

// Tier: unit: the proxy on loopback, a real TLS server upstream.

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/gateway"
)

// connected is a connection through the proxy that CONNECT example.com
// was answered 200 on, with its reader; its deadline is 3 s.
func (r *rig) connected(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	return connectThrough(t, r.addr, "example.com:443", 3*time.Second)
}

// connectThrough is a connection through the proxy at addr that CONNECT
// target was answered 200 on, with its reader and the deadline given.
func connectThrough(t *testing.T, addr, target string, deadline time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(deadline))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		c.Close()
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

// tunnel opens a carrying tunnel to example.com through the proxy and
// completes TLS in it; closing the returned conn ends it.
func (r *rig) tunnel(t *testing.T) net.Conn {
	t.Helper()
	c, _ := r.connected(t)
	pool := r.https.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		c.Close()
		t.Fatalf("TLS through the tunnel: %v", err)
	}
	c.SetDeadline(time.Time{})
	t.Cleanup(func() { tc.Close() })
	return tc
}

// An agent at its share of tunnels is refused the next connection at
// once, with a 403 naming the share; another agent is not; a tunnel
// closed frees its place.
func TestTunnelShare(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{
		1001: {ID: 1, Rules: rules(t, "example.com:443"), Tunnels: 2, Handshakes: 2},
		1002: {ID: 2, Rules: rules(t, "example.com:443"), Tunnels: 2, Handshakes: 2},
	}})
	first := r.tunnel(t)
	r.tunnel(t)
	code, body, took := r.connect(t, "example.com:443")
	if code != 403 || !strings.Contains(body, "agent 1: refused: it has 2 connections through the proxy open, its share is 2 (agents[id=1].shares.tunnels)") {
		t.Fatalf("a 3rd tunnel: %d %q", code, body)
	}
	if took > 500*time.Millisecond {
		t.Errorf("the refusal took %s", took)
	}
	if rec := r.last(t, 1); rec.Reason != ReasonTunnels || rec.Agent != 1 || rec.Fields()["DECISION"] != "deny" {
		t.Errorf("record %+v", rec)
	}
	r.uids.set(1002, nil)
	r.tunnel(t)
	r.uids.set(1001, nil)
	first.Close()
	deadline := time.Now().Add(3 * time.Second)
	for r.srv.tunnels.Held(1001) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("agent 1 holds %d tunnels after one closed", r.srv.tunnels.Held(1001))
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.tunnel(t)
}

// Connections that never finish their request (a slow loris) hold only
// the agent's handshakes: the one beyond is refused at once, its carrying
// tunnels and other agents go on.
func TestHandshakeShare(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{
		1001: {ID: 1, Rules: rules(t, "example.com:443"), Tunnels: 8, Handshakes: 2},
		1002: {ID: 2, Rules: rules(t, "example.com:443"), Tunnels: 8, Handshakes: 2},
	}})
	carrying := r.tunnel(t)
	for range 2 {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT exa") // and nothing more
	}
	deadline := time.Now().Add(3 * time.Second)
	for r.srv.handshakes.Held(1001) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("agent 1 has %d handshakes in flight", r.srv.handshakes.Held(1001))
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, body, _ := r.connect(t, "example.com:443")
	if code != 403 || !strings.Contains(body, "its share is 2 (agents[id=1].shares.handshakes)") {
		t.Fatalf("a 3rd handshake: %d %q", code, body)
	}
	if rec := r.last(t, 1); rec.Reason != ReasonHandshakes {
		t.Errorf("record %+v", rec)
	}
	if _, err := io.WriteString(carrying, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(carrying), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("the carrying tunnel during the loris: %v %v", resp, err)
	}
	r.uids.set(1002, nil)
	r.tunnel(t)
}

// A tunnel that carries nothing either way for the idle bound is closed
// and its place given back; one that carries goes on. So too beside the
// gateway, as flock-proxy always runs: there dispatch's reader wraps the
// client's socket, and the kernel is asked about the socket under it.
func TestIdleTunnelIsClosed(t *testing.T) {
	for _, beside := range []bool{false, true} {
		name := "alone"
		if beside {
			name = "beside the gateway"
		}
		t.Run(name, func(t *testing.T) {
			var before []func(*Server)
			if beside {
				ln := gateway.NewListener(&net.TCPAddr{})
				t.Cleanup(func() { ln.Close() })
				before = append(before, func(s *Server) { s.Gateway = ln })
			}
			r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443"), Tunnels: 4, Handshakes: 4}}}, before...)
			// Idle is well above the busy tunnel's gaps (a request every
			// 50 ms) on a loaded machine, and the busy tunnel outlives it
			// more than twice over.
			r.srv.Idle = time.Second
			quiet := r.tunnel(t)
			busy := r.tunnel(t)
			stop := time.Now().Add(2500 * time.Millisecond)
			for time.Now().Before(stop) {
				io.WriteString(busy, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
				if err != nil {
					t.Fatalf("the busy tunnel after %s: %v", time.Until(stop), err)
				}
				io.Copy(io.Discard, resp.Body)
				time.Sleep(50 * time.Millisecond)
			}
			quiet.SetReadDeadline(time.Now().Add(3 * time.Second))
			var ne net.Error
			if _, err := quiet.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("the quiet tunnel is still open: %v", err)
			}
			rec := r.last(t, 1)
			if !rec.Allowed() || !strings.Contains(rec.Detail, "carrying nothing") {
				t.Errorf("record of the idle tunnel %+v", rec)
			}
			// The quiet tunnel's place is given back as it closes, not
			// necessarily before its client sees the close.
			deadline := time.Now().Add(3 * time.Second)
			for r.srv.tunnels.Held(1001) != 1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := r.srv.tunnels.Held(1001); n != 1 {
				t.Errorf("agent 1 holds %d tunnels, want the busy one", n)
			}
		})
	}
}

// Share counts each uid apart, and gives a place back once however often
// it is released.
func TestShare(t *testing.T) {
	var s Share
	r1, _, ok1 := s.Take(1, 2)
	_, _, ok2 := s.Take(1, 2)
	_, held, ok3 := s.Take(1, 2)
	_, _, ok4 := s.Take(2, 2)
	if !ok1 || !ok2 || ok3 || held != 2 || !ok4 {
		t.Fatalf("takes: %v %v %v (held %d) %v", ok1, ok2, ok3, held, ok4)
	}
	r1()
	r1()
	if n := s.Held(1); n != 1 {
		t.Errorf("after one release twice, uid 1 holds %d", n)
	}
	for range 100 {
		if _, _, ok := s.Take(3, 0); !ok {
			t.Fatal("max 0 is no bound")
		}
	}
}
