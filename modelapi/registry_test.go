package modelapi_test

// Tier: unit. A provider kind is one file: a kind registered here, and
// nowhere else, is one the spec accepts and the fix names, whose SDK
// variables the agent's unit gets, that the gateway routes, keys,
// meters and answers errors for in its own shape, and that the audit
// probes.

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/audit"
	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// echo is a fourth kind, as a new kind's file would write it: its key in
// X-Echo-Key, one endpoint that spends, usage in "spent".
func init() {
	modelapi.Register(modelapi.Kind{
		Name: "echo", About: "the Echo API", ExampleURL: "https://api.echo.test",
		BaseURLEnv: "ECHO_BASE_URL", KeyEnv: "ECHO_API_KEY",
		Auth: func(h http.Header, key string) { h.Set("X-Echo-Key", key) },
		Endpoints: []modelapi.Endpoint{
			{Method: http.MethodPost, Path: "/say", Spends: true,
				Judge: func(*modelapi.Body, http.Header, modelapi.Allowed) (modelapi.Plan, error) {
					return modelapi.Plan{MaxOutput: 10}, nil
				}},
			{Method: http.MethodGet, Path: "/voices"},
		},
		Usage: modelapi.UsageFormat{Paths: []modelapi.UsagePath{{Keys: []string{"spent"}}}, New: func() modelapi.UsageReader { return &echoUsage{} }},
		Error: func(status int, msg string) any { return map[string]any{"echo_error": msg} },
		Probe: modelapi.Probe{List: "/voices", Send: "/say", Ask: `{"say":"hi"}`, Tool: `{"say":"hi","tools":["search"]}`},
	})
}

type echoUsage struct{ in, out uint64 }

func (e *echoUsage) Take(obj []byte) bool {
	var u struct{ In, Out *uint64 }
	if json.Unmarshal(obj, &u) != nil || u.In == nil {
		return false
	}
	e.in, e.out = *u.In, *u.Out
	return true
}

func (e *echoUsage) Usage() (wire.Tokens, modelapi.ToolUses) {
	return wire.Tokens{InputTokens: e.in, OutputTokens: e.out}, modelapi.ToolUses{}
}

const echoSpec = `
providers: [{name: talk, kind: echo, url: "https://api.echo.test"}]
agents: [{id: 1, models: {talk: {tokens_per_day: 1000}}}]
`

func TestANewKindRegistersEverywhere(t *testing.T) {
	// The spec: accepted, and named in the fix for a kind it does not know.
	f, err := spec.Parse([]byte(echoSpec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spec.Parse([]byte(strings.Replace(echoSpec, "kind: echo", "kind: shout", 1))); err == nil || !strings.Contains(err.Error(), "echo (the Echo API)") {
		t.Errorf("the kinds offered: %v", err)
	}
	// The agent's unit: its SDK's variables.
	if got := spec.GrantEnvNames("echo"); strings.Join(got, " ") != "ECHO_BASE_URL ECHO_API_KEY" {
		t.Errorf("its variables: %v", got)
	}
	// The audit: its own requests.
	a, _ := f.Agent(1)
	var paths []string
	for _, p := range audit.Plan(f, a, audit.Target{}, audit.Colluder{}) {
		if strings.HasPrefix(p.Req.Op, "model-") {
			paths = append(paths, p.Req.Path)
		}
	}
	if s := strings.Join(paths, " "); !strings.Contains(s, "/voices") || !strings.Contains(s, "/say") {
		t.Errorf("the audit's model probes: %v", paths)
	}

	// The gateway: routed, keyed, metered; its errors in its shape.
	var seen http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"said":"hi","spent":{"in":3,"out":4}}`)
	}))
	defer up.Close()
	pr := spec.Provider{Name: "talk", Kind: "echo", URL: up.URL, KeyFile: "/etc/flock/keys/talk"}
	st, err := gateway.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := &gateway.Gateway{UIDs: uidOf(f.UID(1)), Store: st, Logf: t.Logf}
	pol := gateway.Policy{Providers: map[string]spec.Provider{"talk": pr}, Agents: map[uint32]gateway.Agent{f.UID(1): {ID: 1, Grants: map[string]spec.Grant{"talk": a.Models[0]}}}}
	if err := g.SetPolicy(pol, map[string]gateway.Secret{"talk": {Key: "echo-operator-key"}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := g.Server()
	go srv.Serve(ln)
	defer gateway.Shutdown(srv, time.Second)
	post := func(path string) (int, string) {
		resp, err := http.Post("http://"+ln.Addr().String()+path, "application/json", strings.NewReader(`{"say":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post("/talk/say"); status != 200 || seen.Get("X-Echo-Key") != "echo-operator-key" {
		t.Fatalf("through the gateway: %d %s, the upstream saw %v", status, body, seen)
	}
	if u := st.Usage(1)["talk"]; u.InputTokens != 3 || u.OutputTokens != 4 {
		t.Errorf("counted %+v, want 3 in and 4 out", u.Tokens)
	}
	if status, body := post("/talk/shout"); status != 404 || !strings.Contains(body, `"echo_error"`) || !strings.Contains(body, "POST /say, GET /voices") {
		t.Errorf("an endpoint it does not carry: %d %s", status, body)
	}
}

// uidOf says every connection is uid's.
type uidOf uint32

func (u uidOf) UID(netip.AddrPort, netip.AddrPort) (uint32, error) { return uint32(u), nil }
