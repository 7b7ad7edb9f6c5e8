package gateway

// Tier: unit. Provider-side tools through the gateway: a request asking
// for one its grant does not list is refused before it is sent, the uses
// of each are counted per agent and provider across a kill, and a
// grant's tools reach flock-proxy through its config file.

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Through the gateway: a request with a web search tool its grant does
// not allow never reaches the provider and is a 403 in the provider's
// format naming the grant's field; the same grant lets Claude Code's
// betas and its own tools through, and a grant that lists web_search
// lets the tool through. (Before grants listed server tools, the web
// search went to the provider.)
func TestGatewayRefusesServerToolsTheGrantDoesNotList(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth"}, "oai": {Provider: "oai"}},
		map[string]spec.Grant{"anth": {Provider: "anth", ServerTools: []spec.ServerTool{modelapi.ToolWebSearch}}}))
	search := `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"say three little words"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]}`
	status, h, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", search)
	if want := `flock proxy: agent 1: the request asks for the provider's web_search tool (tools[0].type "web_search_20250305"), which reaches the network from the provider, outside the agent's egress, and is charged per search; allow it with server_tools: [web_search] in agents[id=1].models.anth`; status != 403 || h.Get("X-Flock-Proxy") != "refused" ||
		!strings.Contains(body, `"permission_error"`) || errorMessage(t, body) != want {
		t.Errorf("a web search not granted: %d %s\nwant a 403 (permission_error) saying %q", status, body, want)
	}
	status, _, body = r.call(uidA, http.MethodPost, "/oai/responses", `{"model":"gpt-x","input":"hi","tools":[{"type":"web_search_preview"}]}`)
	if status != 403 || !strings.Contains(errorMessage(t, body), "server_tools: [web_search] in agents[id=1].models.oai") {
		t.Errorf("an OpenAI web search not granted: %d %s", status, body)
	}
	status, _, body = r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq, "anthropic-beta", "mcp-client-2025-04-04")
	if status != 403 || !strings.Contains(errorMessage(t, body), "betas: [mcp-client-2025-04-04] in agents[id=1].models.anth") {
		t.Errorf("the MCP connector's beta not granted: %d %s", status, body)
	}
	if seen := r.up.Seen(); len(seen) != 0 {
		t.Errorf("refused requests reached the provider: %v", seen)
	}
	r.mu.Lock()
	if len(r.refused) != 3 {
		t.Errorf("told of %d refusals, want 3: %q", len(r.refused), r.refused)
	}
	r.mu.Unlock()
	if status, _, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq, "anthropic-beta", claudeCodeBetas); status != 200 {
		t.Errorf("Claude Code's betas: %d %s", status, body)
	}
	if status, _, body := r.call(uidB, http.MethodPost, "/anth/v1/messages", search); status != 200 {
		t.Errorf("a web search granted: %d %s", status, body)
	}
}

// Each request's server tool uses are counted per agent and provider,
// beside its tokens, in the log and the snapshot: a proxy killed (the
// log replayed) or closed (the snapshot read) keeps them.
func TestStoreCountsServerToolUses(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 31, 12, 0, 0, 0, time.UTC)
	var search, mixed modelapi.ToolUses
	search[0] = 3             // web_search
	mixed[0], mixed[2] = 1, 2 // web_search, code_execution
	for _, u := range []modelapi.ToolUses{search, {}, mixed} {
		if err := s.Record(3, "anthropic", Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: 10, OutputTokens: 5}, ServerTools: u}, Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(4, "anthropic", Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: 10}}, Status: 200}); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"web_search": 4, "code_execution": 2}
	check := func(when string, st *Store) {
		t.Helper()
		u := st.Usage(3)["anthropic"]
		if !reflect.DeepEqual(u.ServerToolUses, want) || u.Total() != 45 {
			t.Errorf("%s: server tool uses %v and %d tokens, want %v and 45", when, u.ServerToolUses, u.Total(), want)
		}
		if u := st.Usage(4)["anthropic"]; u.ServerToolUses != nil {
			t.Errorf("%s: an agent that used none: %v", when, u.ServerToolUses)
		}
	}
	check("counted", s)
	s.Usage(3)["anthropic"].ServerToolUses["web_search"] = 100 // a copy
	killed, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("after a kill", killed)
	if err := killed.Close(); err != nil {
		t.Fatal(err)
	}
	closed, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("after a close", closed)
	closed.Close()
	s.Close()
}

// A whole answer that reports no usage (a provider or a compatible
// server that sends none) is counted as estimated, and as the error
// no-usage; one cut before its usage is the error cut.
func TestAnAnswerWithoutUsageIsAnErrorOfItsOwn(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := &Gateway{Store: st}
	for _, cut := range []bool{false, true} {
		x := &exchange{g: g, agent: 1, provider: "oai", status: 200, spends: true, metered: true, meter: modelapi.NewMeter(openai), inputEstimate: 40, maxOutput: 100}
		x.meter.Write([]byte(`{"choices":[{"message":{"content":"` + strings.Repeat("word ", 20) + `"}}]}`))
		x.meter.End()
		x.finish(cut)
	}
	u := st.Usage(1)["oai"]
	if u.Errors[ErrorNoUsage] != 1 || u.Errors[ErrorCut] != 1 || u.EstimatedRequests != 2 || u.InputTokens != 80 || u.OutputTokens < 2*20 {
		t.Errorf("two answers without usage, one whole and one cut: %+v", u)
	}
}

var openai, _ = modelapi.Lookup("openai")

// Claude Code's betas as it sends them: none turns on a server tool.
const claudeCodeBetas = "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,context-management-2025-06-27"
