package gateway

// Tier: unit. Provider-side tools under the operator's control: a
// request's server tools and guarded betas are refused (403, naming the
// grant's field) unless its grant lists them, a tool the gateway does
// not know is refused, the client's own tools and Claude Code's betas
// pass; and the uses of each server tool are counted from the answers.

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// Claude Code's betas as it sends them: none turns on a server tool.
const claudeCodeBetas = "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,context-management-2025-06-27"

// judgeOf judges body as the gateway would for a request of agent 3 to
// kind's path under grant g, and returns the status and line it would
// answer (200, "": let through).
func judgeOf(t *testing.T, kind spec.ProviderKind, path, body string, h http.Header, g spec.Grant) (int, string) {
	t.Helper()
	ep, ok := endpointOf(kind, http.MethodPost, path)
	if !ok {
		t.Fatalf("no endpoint %s %s", kind, path)
	}
	b, err := parseBody([]byte(body))
	if err == nil {
		_, err = ep.judge(b, h, g)
	}
	if err == nil {
		return http.StatusOK, ""
	}
	_, status, line := judged(err, 3)
	return status, line
}

func TestJudgeServerTools(t *testing.T) {
	anth := spec.Grant{Provider: "anthropic"}
	anthSearch := spec.Grant{Provider: "anthropic", ServerTools: []spec.ServerTool{spec.ToolWebSearch}}
	anthAll := spec.Grant{Provider: "anthropic", ServerTools: spec.ServerToolsOf(spec.KindAnthropic), Betas: []string{"mcp-client-2025-04-04"}}
	oai := spec.Grant{Provider: "openai"}
	oaiAll := spec.Grant{Provider: "openai", ServerTools: spec.ServerToolsOf(spec.KindOpenAI)}
	const (
		messages  = "/v1/messages"
		chat      = "/chat/completions"
		responses = "/responses"
	)
	msg := func(tools string, more ...string) string {
		return `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"tools":[` + tools + `]` + strings.Join(more, "") + `}`
	}
	resp := func(tools string) string { return `{"model":"gpt-x","input":"hi","tools":[` + tools + `]}` }
	chatReq := func(tools string, more ...string) string {
		return `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}],"tools":[` + tools + `]` + strings.Join(more, "") + `}`
	}
	fn := `{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"type":{"type":"string"}}}}`
	oaiFn := `{"type":"function","name":"get_weather","parameters":{"type":"object"}}`
	chatFn := `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}`
	beta := func(v ...string) http.Header {
		h := http.Header{}
		for _, s := range v {
			h.Add("anthropic-beta", s)
		}
		return h
	}
	for _, tc := range []struct {
		name       string
		kind       spec.ProviderKind
		path, body string
		h          http.Header
		g          spec.Grant
		status     int
		want       string // in the line
	}{
		// Anthropic: the client's tools pass.
		{"no tools", spec.KindAnthropic, messages, msg(""), nil, anth, 200, ""},
		{"a client tool with no type", spec.KindAnthropic, messages, msg(fn), nil, anth, 200, ""},
		{"a custom tool", spec.KindAnthropic, messages, msg(`{"type":"custom","name":"web_search","input_schema":{"type":"object"}}`), nil, anth, 200, ""},
		{"a tool with type null", spec.KindAnthropic, messages, msg(`{"type":null,"name":"x","input_schema":{}}`), nil, anth, 200, ""},
		{"Anthropic's client tools", spec.KindAnthropic, messages, msg(`{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},{"type":"memory_20250818","name":"memory"}`), nil, anth, 200, ""},
		{"tool search", spec.KindAnthropic, messages, msg(`{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}`), nil, anth, 200, ""},
		{"Claude Code's betas", spec.KindAnthropic, messages, msg(fn), beta(claudeCodeBetas), anth, 200, ""},
		{"Claude Code's betas, header by header", spec.KindAnthropic, messages, msg(fn), beta("claude-code-20250219", " oauth-2025-04-20 , interleaved-thinking-2025-05-14", "context-1m-2025-08-07"), anth, 200, ""},
		// Anthropic: server tools refused by default.
		{"web search", spec.KindAnthropic, messages, msg(fn + `,{"type":"web_search_20250305","name":"web_search","max_uses":5}`), nil, anth, 403,
			`flock proxy: agent 3: the request asks for the provider's web_search tool (tools[1].type "web_search_20250305"), which reaches the network from the provider, outside the agent's egress, and is charged per search; allow it with server_tools: [web_search] in agents[id=3].models.anthropic`},
		{"web search, a newer version", spec.KindAnthropic, messages, msg(`{"type":"web_search_20260209","name":"web_search"}`), nil, anth, 403, "web_search tool (tools[0].type \"web_search_20260209\")"},
		{"web search, its type escaped", spec.KindAnthropic, messages, msg(`{"type":"web_search\u005f20250305","name":"web_search"}`), nil, anth, 403, "server_tools: [web_search]"},
		{"web search, its key in upper case", spec.KindAnthropic, messages, msg(`{"TYPE":"web_search_20250305","name":"web_search"}`), nil, anth, 403, "server_tools: [web_search]"},
		{"web fetch", spec.KindAnthropic, messages, msg(`{"type":"web_fetch_20250910","name":"web_fetch"}`), nil, anthSearch, 403,
			"the provider's web_fetch tool (tools[0].type \"web_fetch_20250910\"), which fetches any URL from the provider, outside the agent's egress; allow it with server_tools: [web_search, web_fetch] in agents[id=3].models.anthropic"},
		{"code execution", spec.KindAnthropic, messages, msg(`{"type":"code_execution_20250825","name":"code_execution"}`), nil, anth, 403, "code_execution tool (tools[0].type \"code_execution_20250825\"), which runs code in the provider's container"},
		{"bash in the code execution container", spec.KindAnthropic, messages, msg(`{"type":"bash_code_execution_20250825","name":"bash_code_execution"}`), nil, anth, 403, "server_tools: [code_execution]"},
		{"the MCP toolset", spec.KindAnthropic, messages, msg(`{"type":"mcp_toolset","mcp_server_name":"x"}`), nil, anth, 403, "server_tools: [mcp]"},
		{"MCP servers", spec.KindAnthropic, messages, msg(fn, `,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}]`), nil, anth, 403,
			"the provider's mcp tool (mcp_servers), which connects from the provider to the MCP servers the request names"},
		{"no MCP servers", spec.KindAnthropic, messages, msg(fn, `,"mcp_servers":[]`), nil, anth, 200, ""},
		{"skills in the container", spec.KindAnthropic, messages, msg("", `,"container":{"skills":[{"type":"anthropic","skill_id":"pptx","version":"latest"}]}`), nil, anth, 403, "code_execution tool (container.skills"},
		{"a container by id", spec.KindAnthropic, messages, msg("", `,"container":"container_011"`), nil, anth, 200, ""},
		{"a tool flock does not know", spec.KindAnthropic, messages, msg(`{"type":"advisor_20260301","name":"advisor"}`), nil, anthAll, 403,
			`a tool of type "advisor_20260301" (tools[0]), which flock does not know: a provider-side tool it does not know is refused`},
		{"a client tool's name with another version form", spec.KindAnthropic, messages, msg(`{"type":"bash_latest","name":"bash"}`), nil, anthAll, 403, `a tool of type "bash_latest"`},
		{"a key twice in a tool", spec.KindAnthropic, messages, msg(`{"type":"custom","name":"x","type":"web_search_20250305"}`), nil, anth, 400, `the key tools[0]."type" is in the request body twice`},
		{"a key twice in a tool, folded", spec.KindAnthropic, messages, msg(`{"type":"custom","name":"x","Type":"web_search_20250305"}`), nil, anth, 400, `is in the request body twice`},
		{"a tool not an object", spec.KindAnthropic, messages, msg(`"web_search"`), nil, anth, 400, "tools[0] is not an object"},
		{"tools not an array", spec.KindAnthropic, messages, `{"model":"x","max_tokens":1,"tools":{"type":"web_search_20250305"}}`, nil, anth, 400, "tools is not an array"},
		{"a type not a string", spec.KindAnthropic, messages, msg(`{"type":["web_search_20250305"]}`), nil, anth, 400, "tools[0].type is [\"web_search_20250305\"]; it must be a string"},
		{"mcp_servers not an array", spec.KindAnthropic, messages, msg("", `,"mcp_servers":{"url":"https://x"}`), nil, anth, 400, "mcp_servers is not an array"},
		// Anthropic: allowed when the grant lists them.
		{"web search allowed", spec.KindAnthropic, messages, msg(`{"type":"web_search_20250305","name":"web_search"}`), nil, anthSearch, 200, ""},
		{"every tool allowed", spec.KindAnthropic, messages, msg(`{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"code_execution_20250825","name":"code_execution"},{"type":"mcp_toolset","mcp_server_name":"x"}`,
			`,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}]`), beta(claudeCodeBetas + ",mcp-client-2025-04-04"), anthAll, 200, ""},
		// Anthropic: guarded betas.
		{"the MCP connector's beta", spec.KindAnthropic, messages, msg(fn), beta(claudeCodeBetas, "mcp-client-2025-11-20"), anth, 403,
			`flock proxy: agent 3: the request asks for the beta feature "mcp-client-2025-11-20" (its anthropic-beta header), which turns on the MCP connector: the provider connects to the MCP servers the request names, outside the agent's egress; allow it with betas: [mcp-client-2025-11-20] in agents[id=3].models.anthropic`},
		{"a beta in a list", spec.KindAnthropic, messages, msg(fn), beta("claude-code-20250219, code-execution-2025-05-22"), anth, 403, `"code-execution-2025-05-22"`},
		{"a beta in upper case", spec.KindAnthropic, messages, msg(fn), beta("Web-Fetch-2025-09-10"), anth, 403, `"web-fetch-2025-09-10"`},
		{"skills' beta", spec.KindAnthropic, messages, msg(fn), beta("skills-2025-10-02"), anthAll, 403, "allow it with betas: [mcp-client-2025-04-04, skills-2025-10-02]"},
		{"the files API's beta", spec.KindAnthropic, messages, msg(fn), beta("files-api-2025-04-14"), anth, 403, "files stored with the provider"},
		{"a beta listed", spec.KindAnthropic, messages, msg(fn), beta("mcp-client-2025-04-04"), anthAll, 200, ""},
		{"another version of a beta listed", spec.KindAnthropic, messages, msg(fn), beta("mcp-client-2025-11-20"), anthAll, 403, "betas: [mcp-client-2025-04-04, mcp-client-2025-11-20]"},
		// OpenAI's Responses.
		{"functions", spec.KindOpenAI, responses, resp(oaiFn + `,{"type":"custom","name":"x"}`), nil, oai, 200, ""},
		{"the client's own tools", spec.KindOpenAI, responses, resp(`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"},{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"}`), nil, oai, 200, ""},
		{"web search (Responses)", spec.KindOpenAI, responses, resp(oaiFn + `,{"type":"web_search"}`), nil, oai, 403,
			`flock proxy: agent 3: the request asks for the provider's web_search tool (tools[1].type "web_search"), which reaches the network from the provider, outside the agent's egress, and is charged per search; allow it with server_tools: [web_search] in agents[id=3].models.openai`},
		{"web search preview", spec.KindOpenAI, responses, resp(`{"type":"web_search_preview"}`), nil, oai, 403, "server_tools: [web_search]"},
		{"web search, dated", spec.KindOpenAI, responses, resp(`{"type":"web_search_preview_2025_03_11"}`), nil, oai, 403, "server_tools: [web_search]"},
		{"file search", spec.KindOpenAI, responses, resp(`{"type":"file_search","vector_store_ids":["vs_1"]}`), nil, oai, 403, "file_search tool (tools[0].type \"file_search\"), which searches the files stored with the provider's account"},
		{"code interpreter", spec.KindOpenAI, responses, resp(`{"type":"code_interpreter","container":{"type":"auto"}}`), nil, oai, 403, "the provider's code_execution tool (tools[0].type \"code_interpreter\")"},
		{"remote MCP", spec.KindOpenAI, responses, resp(`{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com"}`), nil, oai, 403, "server_tools: [mcp]"},
		{"image generation", spec.KindOpenAI, responses, resp(`{"type":"image_generation"}`), nil, oai, 403, "image_generation tool (tools[0].type \"image_generation\"), which is charged per image"},
		{"a Responses tool flock does not know", spec.KindOpenAI, responses, resp(`{"type":"computer"}`), nil, oaiAll, 403, `a tool of type "computer" (tools[0]), which flock does not know`},
		{"a Responses tool with no type", spec.KindOpenAI, responses, resp(`{"name":"x"}`), nil, oaiAll, 403, `a tool with no type (tools[0])`},
		{"every Responses tool allowed", spec.KindOpenAI, responses, resp(`{"type":"web_search"},{"type":"file_search"},{"type":"code_interpreter"},{"type":"mcp"},{"type":"image_generation"}`), nil, oaiAll, 200, ""},
		{"a key twice in a Responses tool", spec.KindOpenAI, responses, resp(`{"type":"function","TYPE":"web_search"}`), nil, oai, 400, "is in the request body twice"},
		// OpenAI's Chat Completions.
		{"chat functions", spec.KindOpenAI, chat, chatReq(chatFn + `,{"type":"custom","custom":{"name":"x"}}`), nil, oai, 200, ""},
		{"chat web_search_options", spec.KindOpenAI, chat, chatReq(chatFn, `,"web_search_options":{}`), nil, oai, 403, "the provider's web_search tool (web_search_options)"},
		{"chat web_search_options null", spec.KindOpenAI, chat, chatReq(chatFn, `,"web_search_options":null`), nil, oai, 200, ""},
		{"chat web_search_options allowed", spec.KindOpenAI, chat, chatReq(chatFn, `,"web_search_options":{}`), nil, oaiAll, 200, ""},
		{"a search model", spec.KindOpenAI, chat, `{"model":"gpt-4o-search-preview","messages":[{"role":"user","content":"hi"}]}`, nil, oai, 403, `the model "gpt-4o-search-preview", which searches the web on every request`},
		{"a server tool in chat", spec.KindOpenAI, chat, chatReq(`{"type":"web_search"}`), nil, oaiAll, 403, `a tool of type "web_search" (tools[0]), which flock does not know`},
		{"a chat tool with no type", spec.KindOpenAI, chat, chatReq(`{"function":{"name":"x"}}`), nil, oai, 403, `a tool with no type (tools[0])`},
	} {
		status, line := judgeOf(t, tc.kind, tc.path, tc.body, tc.h, tc.g)
		if status != tc.status || !strings.Contains(line, tc.want) {
			t.Errorf("%s: %d %q\nwant %d with %q", tc.name, status, line, tc.status, tc.want)
		}
	}
}

// Through the gateway: a request with a web search tool its grant does
// not allow never reaches the provider and is a 403 in the provider's
// format naming the grant's field; the same grant lets Claude Code's
// betas and its own tools through, and a grant that lists web_search
// lets the tool through. (Before grants listed server tools, the web
// search went to the provider.)
func TestGatewayRefusesServerToolsTheGrantDoesNotList(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth"}, "oai": {Provider: "oai"}},
		map[string]spec.Grant{"anth": {Provider: "anth", ServerTools: []spec.ServerTool{spec.ToolWebSearch}}}))
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

// The uses of each server tool, from the answers as the providers write
// them: Anthropic's usage.server_tool_use (cumulative, the last
// message_delta's), or its server_tool_use blocks when a stream is cut
// before that; OpenAI's tool call items, each counted once though a
// stream names it when it is added, when it is done and again in
// response.completed. Every stream is read in pieces of every size.
func TestMeterCountsServerToolUses(t *testing.T) {
	block := func(i int, name string) string {
		return "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":" + string(rune('0'+i)) + ",\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"" + name + "\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" + string(rune('0'+i)) + ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\": \\\"type\\\"}\"}}\n\n"
	}
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1,\"server_tool_use\":{\"web_search_requests\":0}}}}\n\n"
	text := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the name web_search\"}}\n\n"
	delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15,\"server_tool_use\":{\"web_search_requests\":3,\"web_fetch_requests\":1}}}\n\n"
	client := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":5,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n"
	anthropic := start + text + block(1, "web_search") + block(2, "web_search") + block(3, "web_fetch") + client + delta
	anthropicCut := start + text + block(1, "web_search") + block(2, "web_fetch") + block(3, "bash_code_execution") +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":4,\"content_block\":{\"type\":\"mcp_tool_use\",\"id\":\"mcptoolu_1\",\"name\":\"search\",\"server_name\":\"x\",\"input\":{}}}\n\n" + client
	anthropicJSON := `{"id":"m","type":"message","content":[{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"x"}},{"type":"web_search_tool_result","tool_use_id":"s1","content":[{"type":"web_search_result","url":"https://x","title":"web_search"}]},{"type":"tool_use","id":"t","name":"web_search","input":{"type":"server_tool_use"}},{"type":"text","text":"hi"}],` +
		`"usage":{"input_tokens":7,"output_tokens":3,"server_tool_use":{"web_search_requests":2,"code_execution_requests":1}}}`
	item := func(ev, typ string) string {
		return "event: " + ev + "\ndata: {\"type\":\"" + ev + "\",\"output_index\":0,\"item\":{\"type\":\"" + typ + "\",\"id\":\"x\",\"status\":\"completed\"},\"sequence_number\":1}\n\n"
	}
	calls := func(ev string) string {
		return item(ev, "web_search_call") + item(ev, "web_search_call") + item(ev, "file_search_call") + item(ev, "code_interpreter_call") +
			item(ev, "mcp_list_tools") + item(ev, "mcp_call") + item(ev, "image_generation_call") + item(ev, "function_call") + item(ev, "message")
	}
	output := `[{"type":"web_search_call","id":"ws1","status":"completed","action":{"type":"search","query":"web_search_call"}},{"type":"web_search_call","id":"ws2"},` +
		`{"type":"file_search_call","id":"fs","queries":["x"]},{"type":"code_interpreter_call","id":"ci"},{"type":"mcp_call","id":"mc"},{"type":"image_generation_call","id":"ig","result":"aGk="},` +
		`{"type":"function_call","name":"web_search_call"},{"type":"message","content":[{"type":"output_text","text":"web_search_call"}]}]`
	responses := calls("response.output_item.added") + calls("response.output_item.done") +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"tools\":[{\"type\":\"web_search\"}],\"output\":" + output + ",\"usage\":{\"input_tokens\":11,\"output_tokens\":4}}}\n\n"
	responsesCut := calls("response.output_item.added") + item("response.output_item.done", "web_search_call")
	responsesJSON := `{"id":"r","object":"response","output":` + output + `,"usage":{"input_tokens":11,"output_tokens":4}}`
	uses := func(m map[spec.ServerTool]uint64) ToolUses {
		var u ToolUses
		for t, n := range m {
			u[toolIndex(t)] = n
		}
		return u
	}
	openaiAll := uses(map[spec.ServerTool]uint64{spec.ToolWebSearch: 2, spec.ToolFileSearch: 1, spec.ToolCodeExecution: 1, spec.ToolMCP: 1, spec.ToolImageGeneration: 1})
	for _, tc := range []struct {
		name   string
		kind   spec.ProviderKind
		stream bool
		answer string
		want   ToolUses
	}{
		{"an Anthropic stream", spec.KindAnthropic, true, anthropic, uses(map[spec.ServerTool]uint64{spec.ToolWebSearch: 3, spec.ToolWebFetch: 1})},
		{"an Anthropic stream cut before its usage", spec.KindAnthropic, true, anthropicCut, uses(map[spec.ServerTool]uint64{spec.ToolWebSearch: 1, spec.ToolWebFetch: 1, spec.ToolCodeExecution: 1, spec.ToolMCP: 1})},
		{"an Anthropic answer", spec.KindAnthropic, false, anthropicJSON, uses(map[spec.ServerTool]uint64{spec.ToolWebSearch: 2, spec.ToolCodeExecution: 1})},
		{"a Responses stream", spec.KindOpenAI, true, responses, openaiAll},
		{"a Responses stream cut", spec.KindOpenAI, true, responsesCut, openaiAll},
		{"a Responses answer", spec.KindOpenAI, false, responsesJSON, openaiAll},
		{"an Anthropic stream without tools", spec.KindAnthropic, true, start + text + client, ToolUses{}},
	} {
		for size := 1; size <= len(tc.answer); size += 1 + size/16 {
			m := &meter{kind: tc.kind}
			if tc.stream {
				m.stream()
			}
			for i := 0; i < len(tc.answer); i += size {
				m.write([]byte(tc.answer[i:min(i+size, len(tc.answer))]))
			}
			m.end()
			if got := m.usage().ServerTools; got != tc.want {
				t.Errorf("%s in pieces of %d: %v, want %v", tc.name, size, got.Map(), tc.want.Map())
				break
			}
		}
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
	var search, mixed ToolUses
	search[toolIndex(spec.ToolWebSearch)] = 3
	mixed[toolIndex(spec.ToolWebSearch)], mixed[toolIndex(spec.ToolCodeExecution)] = 1, 2
	for _, u := range []ToolUses{search, {}, mixed} {
		if err := s.Record(3, "anthropic", Outcome{At: at, Usage: Usage{Input: 10, Output: 5, ServerTools: u}, Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(4, "anthropic", Outcome{At: at, Usage: Usage{Input: 10}, Status: 200}); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"web_search": 4, "code_execution": 2}
	check := func(when string, st *Store) {
		t.Helper()
		u := st.Usage(3)["anthropic"]
		if !reflect.DeepEqual(u.ServerToolUses, want) || u.Tokens() != 45 {
			t.Errorf("%s: server tool uses %v and %d tokens, want %v and 45", when, u.ServerToolUses, u.Tokens(), want)
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
