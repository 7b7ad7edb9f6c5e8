package proxy

// Tier: unit.

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

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
