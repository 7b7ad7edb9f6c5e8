package proxy

// Tier: unit.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/gateway"
)

// One listener, two protocols: a CONNECT is the proxy's tunnel, any other
// request the gateway's, with the bytes read to tell them apart handed
// on whole; without a gateway a plain request is refused as before.
func TestDispatchHandsPlainHTTPToTheGateway(t *testing.T) {
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}})
	if status, body, _ := r.connect(t, "example.com:443"); status != 200 {
		t.Fatalf("CONNECT with no gateway: %d %s", status, body)
	}
	resp, err := http.Get("http://" + r.addr + "/anthropic/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "only HTTPS is carried (CONNECT)") {
		t.Errorf("a plain request with no gateway: %d %s", resp.StatusCode, b)
	}

	ln := gateway.NewListener(&net.TCPAddr{})
	r = newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}}, func(s *Server) { s.Gateway = ln })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		io.WriteString(w, "gateway: "+req.Method+" "+req.URL.Path+" "+string(body))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	defer ln.Close()
	resp, err = http.Post("http://"+r.addr+"/anthropic/v1/messages", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `gateway: POST /anthropic/v1/messages {"x":1}` {
		t.Errorf("a plain request: %d %q, want the gateway's answer with the request whole", resp.StatusCode, b)
	}
	if status, body, _ := r.connect(t, "example.com:443"); status != 200 {
		t.Errorf("CONNECT beside the gateway: %d %s", status, body)
	}
	if got, err := r.get("example.com"); err != nil || got != "hello from upstream" {
		t.Errorf("a tunnel beside the gateway: %q %v", got, err)
	}
}

// A gateway connection holds a place in its agent's share of tunnels
// while it is open: the one beyond is answered 429 at once, recorded as a
// tunnel over its share is, and a closed one frees its place. A uid the
// proxy does not know goes on to the gateway, which refuses it itself.
func TestGatewayConnectionsAreInTheTunnelShare(t *testing.T) {
	ln := gateway.NewListener(&net.TCPAddr{})
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443"), Tunnels: 2, Handshakes: 2}}},
		func(s *Server) { s.Gateway = ln })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	defer srv.Close()
	defer ln.Close()

	// open sends one request on a new connection and keeps it open, as an
	// SDK's pool does; it returns the connection and the answer.
	open := func() (net.Conn, *http.Response) {
		t.Helper()
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, "GET /anthropic/v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("a request to the gateway: %v", err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Cleanup(func() { c.Close() })
		return c, resp
	}
	first, resp := open()
	if resp.StatusCode != 200 {
		t.Fatalf("the first connection: %d", resp.StatusCode)
	}
	if _, resp = open(); resp.StatusCode != 200 {
		t.Fatalf("the second connection: %d", resp.StatusCode)
	}
	if _, resp = open(); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third connection at a share of 2: %d %v, want 429 with Retry-After", resp.StatusCode, resp.Header)
	}
	if rec := r.last(t, 1); rec.Reason != ReasonTunnels || rec.Agent != 1 {
		t.Errorf("record %+v, want the tunnels share's refusal", rec)
	}
	first.Close()
	deadline := time.Now().Add(3 * time.Second)
	for r.srv.tunnels.Held(1001) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("agent 1 holds %d after one connection closed", r.srv.tunnels.Held(1001))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, resp = open(); resp.StatusCode != 200 {
		t.Errorf("a connection after one closed: %d", resp.StatusCode)
	}
	r.uids.set(1005, nil)
	for i := 0; i < 3; i++ {
		if _, resp = open(); resp.StatusCode != 200 {
			t.Errorf("a uid the proxy does not know, connection %d: %d, want it handed to the gateway", i+1, resp.StatusCode)
		}
	}
}

// A connection whose socket the kernel cannot name (reset before the
// lookup: sock_diag's ErrNoSocket) is refused by the proxy itself, never
// handed to the gateway to be asked about again.
func TestGatewayConnectionOfNoKnownSocketIsRefused(t *testing.T) {
	ln := gateway.NewListener(&net.TCPAddr{})
	r := newRig(t, testDNS, Policy{Agents: map[uint32]AgentRules{1001: {ID: 1, Rules: rules(t, "example.com:443")}}}, func(s *Server) { s.Gateway = ln })
	r.uids.set(0, ErrNoSocket)
	handed := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			handed <- c
		}
	}()
	defer ln.Close()
	resp, err := http.Post("http://"+r.addr+"/anthropic/v1/messages", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "the kernel could not say who owns this connection") {
		t.Errorf("a connection of no known socket: %d %s", resp.StatusCode, b)
	}
	select {
	case <-handed:
		t.Error("the connection was handed to the gateway")
	case <-time.After(100 * time.Millisecond):
	}
}
