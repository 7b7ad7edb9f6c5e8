package gateway

// Tier: unit.

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// Every request flock does not forward is answered at once, in the
// provider's own error format (an SDK raises its usual error), with one
// line that names the agent and the fix.
func TestGatewayRefusals(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth"}}, map[string]spec.Grant{"oai": {Provider: "oai"}}))
	big := `{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", MaxRequestBody) + `"}]}`
	for _, tc := range []struct {
		name       string
		uid        uint32
		method     string
		path, body string
		status     int
		typ, want  string
	}{
		{"a uid that is no agent", uidNobody, "POST", "/anth/v1/messages", anthropicReq, 403, "permission_error", "uid 65534 is not a flock agent granted a model API"},
		{"another agent's grant", uidA, "POST", "/oai/chat/completions", openaiReq, 403, "invalid_request_error", "agent 1 is not granted provider oai; add oai to agents[id=1].models in the spec (it is granted anth (the base URLs in its environment: FLOCK_MODEL_URL_ANTH))"},
		{"a provider not in the spec", uidA, "POST", "/gemini/v1/models", "", 404, "not_found_error", `agent 1: no provider "gemini" here; it is granted anth`},
		{"an endpoint that cannot be metered", uidA, "POST", "/anth/v1/messages/batches", "{}", 404, "not_found_error", `POST "/v1/messages/batches" is not an endpoint the model gateway carries for provider anth (only what it can meter: POST /v1/messages,`},
		{"a body over the bound", uidA, "POST", "/anth/v1/messages", big, 413, "request_too_large", "the request body is"},
		{"a background response", uidB, "POST", "/oai/responses", `{"model":"x","background":true,"input":"hi"}`, 400, "invalid_request_error", "background: true spends tokens the gateway cannot meter"},
	} {
		start := time.Now()
		status, h, body := r.call(tc.uid, tc.method, tc.path, tc.body)
		took := time.Since(start)
		msg := errorMessage(t, body)
		if status != tc.status || !strings.Contains(body, `"`+tc.typ+`"`) || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %s; want %d, type %s, a message with %q", tc.name, status, body, tc.status, tc.typ, tc.want)
		}
		if h.Get("X-Flock-Proxy") != "refused" {
			t.Errorf("%s: no X-Flock-Proxy: refused header", tc.name)
		}
		t.Logf("%-36s %d in %v: %s", tc.name, status, took.Round(time.Microsecond), msg)
	}
	if seen := r.up.Seen(); len(seen) != 0 {
		t.Errorf("refused requests reached the upstream: %v", seen)
	}
	if len(r.refused) != 6 {
		t.Errorf("told of %d refusals, want 6: %q", len(r.refused), r.refused)
	}
}

// A provider that does not answer is a fast 502 in its own format, naming
// the provider and what the dial said; it counts as an error of the agent.
func TestGatewayUpstreamDown(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	pol := r.g.Policy()
	pr := pol.Providers["oai"]
	pr.URL = down + "/v1"
	pol.Providers["oai"] = pr
	if err := r.g.SetPolicy(pol, r.secrets); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, _, body := r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiReq)
	took := time.Since(start)
	if status != 502 || !strings.Contains(body, `"server_error"`) || !strings.Contains(errorMessage(t, body), "provider oai ("+down+"/v1) did not answer: dial tcp") {
		t.Errorf("upstream down: %d %s", status, body)
	}
	t.Logf("upstream down: 502 in %v", took.Round(time.Microsecond))
	eventually(t, func() error {
		if n := r.g.Store.Usage(idA)["oai"].Errors["502"]; n != 1 {
			return errorf("502s counted: %d, want 1", n)
		}
		return nil
	})
}

// An upstream's own error comes back unchanged: its status, its format.
func TestGatewayPassesUpstreamErrorsUnchanged(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	r.secrets["anth"] = Secret{Key: "sk-wrong", CA: r.secrets["anth"].CA}
	if err := r.g.SetPolicy(r.g.Policy(), r.secrets); err != nil {
		t.Fatal(err)
	}
	status, h, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq)
	if status != 401 || body != `{"error":{"message":"invalid x-api-key","type":"authentication_error"},"type":"error"}`+"\n" || h.Get("X-Flock-Proxy") != "" {
		t.Errorf("the upstream's 401: %d %q (X-Flock-Proxy %q)", status, body, h.Get("X-Flock-Proxy"))
	}
	eventually(t, func() error {
		if n := r.g.Store.Usage(idA)["anth"].Errors["401"]; n != 1 {
			return errorf("401s counted: %d", n)
		}
		return nil
	})
}
