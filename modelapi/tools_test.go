package modelapi

// Tier: unit. Provider-side tools under the operator's control: a
// request's server tools and guarded betas are refused (403, naming the
// grant's field) unless its grant lists them, a tool the gateway does
// not know is refused, the client's own tools and Claude Code's betas
// pass; and the uses of each server tool are counted from the answers.

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Claude Code's betas as it sends them: none turns on a server tool.
const claudeCodeBetas = "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,context-management-2025-06-27"

// judgeOf judges body as the gateway would for a request of agent 3 to
// kind's path under grant g, and returns the status and line it would
// answer (200, "": let through).
func judgeOf(t *testing.T, kind string, path, body string, h http.Header, g Allowed) (int, string) {
	t.Helper()
	ep, ok := kindOf(t, kind).Endpoint(http.MethodPost, path)
	if !ok {
		t.Fatalf("no endpoint %s %s", kind, path)
	}
	b, err := ParseBody([]byte(body))
	if err == nil {
		_, err = ep.Read(b, h, g)
	}
	var na *NotAllowed
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.As(err, &na):
		return http.StatusForbidden, "flock proxy: agent 3: " + na.Line(3)
	}
	return http.StatusBadRequest, err.Error()
}

// kindOf is the kind registered as name.
func kindOf(t *testing.T, name string) *Kind {
	t.Helper()
	k, ok := Lookup(name)
	if !ok {
		t.Fatalf("no kind %q", name)
	}
	return k
}

func TestJudgeServerTools(t *testing.T) {
	anth := Allowed{Provider: "anthropic"}
	anthSearch := Allowed{Provider: "anthropic", Tools: []ServerTool{ToolWebSearch}}
	anthAll := Allowed{Provider: "anthropic", Tools: anthropicOffers, Betas: []string{"mcp-client-2025-04-04"}}
	oai := Allowed{Provider: "openai"}
	oaiAll := Allowed{Provider: "openai", Tools: openaiOffers}
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
		kind       string
		path, body string
		h          http.Header
		g          Allowed
		status     int
		want       string // in the line
	}{
		// Anthropic: the client's tools pass.
		{"no tools", "anthropic", messages, msg(""), nil, anth, 200, ""},
		{"a client tool with no type", "anthropic", messages, msg(fn), nil, anth, 200, ""},
		{"a custom tool", "anthropic", messages, msg(`{"type":"custom","name":"web_search","input_schema":{"type":"object"}}`), nil, anth, 200, ""},
		{"a tool with type null", "anthropic", messages, msg(`{"type":null,"name":"x","input_schema":{}}`), nil, anth, 200, ""},
		{"Anthropic's client tools", "anthropic", messages, msg(`{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},{"type":"memory_20250818","name":"memory"}`), nil, anth, 200, ""},
		{"tool search", "anthropic", messages, msg(`{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}`), nil, anth, 200, ""},
		{"Claude Code's betas", "anthropic", messages, msg(fn), beta(claudeCodeBetas), anth, 200, ""},
		{"Claude Code's betas, header by header", "anthropic", messages, msg(fn), beta("claude-code-20250219", " oauth-2025-04-20 , interleaved-thinking-2025-05-14", "context-1m-2025-08-07"), anth, 200, ""},
		// Anthropic: server tools refused by default.
		{"web search", "anthropic", messages, msg(fn + `,{"type":"web_search_20250305","name":"web_search","max_uses":5}`), nil, anth, 403,
			`flock proxy: agent 3: the request asks for the provider's web_search tool (tools[1].type "web_search_20250305"), which reaches the network from the provider, outside the agent's egress, and is charged per search; allow it with server_tools: [web_search] in agents[id=3].models.anthropic`},
		{"web search, a newer version", "anthropic", messages, msg(`{"type":"web_search_20260209","name":"web_search"}`), nil, anth, 403, "web_search tool (tools[0].type \"web_search_20260209\")"},
		{"web search, its type escaped", "anthropic", messages, msg(`{"type":"web_search\u005f20250305","name":"web_search"}`), nil, anth, 403, "server_tools: [web_search]"},
		{"web search, its key in upper case", "anthropic", messages, msg(`{"TYPE":"web_search_20250305","name":"web_search"}`), nil, anth, 403, "server_tools: [web_search]"},
		{"web fetch", "anthropic", messages, msg(`{"type":"web_fetch_20250910","name":"web_fetch"}`), nil, anthSearch, 403,
			"the provider's web_fetch tool (tools[0].type \"web_fetch_20250910\"), which fetches any URL from the provider, outside the agent's egress; allow it with server_tools: [web_search, web_fetch] in agents[id=3].models.anthropic"},
		{"code execution", "anthropic", messages, msg(`{"type":"code_execution_20250825","name":"code_execution"}`), nil, anth, 403, "code_execution tool (tools[0].type \"code_execution_20250825\"), which runs code in the provider's container"},
		{"bash in the code execution container", "anthropic", messages, msg(`{"type":"bash_code_execution_20250825","name":"bash_code_execution"}`), nil, anth, 403, "server_tools: [code_execution]"},
		{"the MCP toolset", "anthropic", messages, msg(`{"type":"mcp_toolset","mcp_server_name":"x"}`), nil, anth, 403, "server_tools: [mcp]"},
		{"MCP servers", "anthropic", messages, msg(fn, `,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}]`), nil, anth, 403,
			"the provider's mcp tool (mcp_servers), which connects from the provider to the MCP servers the request names"},
		{"no MCP servers", "anthropic", messages, msg(fn, `,"mcp_servers":[]`), nil, anth, 200, ""},
		{"skills in the container", "anthropic", messages, msg("", `,"container":{"skills":[{"type":"anthropic","skill_id":"pptx","version":"latest"}]}`), nil, anth, 403, "code_execution tool (container.skills"},
		{"a container by id", "anthropic", messages, msg("", `,"container":"container_011"`), nil, anth, 200, ""},
		{"a tool flock does not know", "anthropic", messages, msg(`{"type":"advisor_20260301","name":"advisor"}`), nil, anthAll, 403,
			`a tool of type "advisor_20260301" (tools[0]), which flock does not know: a provider-side tool it does not know is refused`},
		{"a client tool's name with another version form", "anthropic", messages, msg(`{"type":"bash_latest","name":"bash"}`), nil, anthAll, 403, `a tool of type "bash_latest"`},
		{"a key twice in a tool", "anthropic", messages, msg(`{"type":"custom","name":"x","type":"web_search_20250305"}`), nil, anth, 400, `the key tools[0]."type" is in the request body twice`},
		{"a key twice in a tool, folded", "anthropic", messages, msg(`{"type":"custom","name":"x","Type":"web_search_20250305"}`), nil, anth, 400, `is in the request body twice`},
		{"a tool not an object", "anthropic", messages, msg(`"web_search"`), nil, anth, 400, "tools[0] is not an object"},
		{"tools not an array", "anthropic", messages, `{"model":"x","max_tokens":1,"tools":{"type":"web_search_20250305"}}`, nil, anth, 400, "tools is not an array"},
		{"a type not a string", "anthropic", messages, msg(`{"type":["web_search_20250305"]}`), nil, anth, 400, "tools[0].type is [\"web_search_20250305\"]; it must be a string"},
		{"mcp_servers not an array", "anthropic", messages, msg("", `,"mcp_servers":{"url":"https://x"}`), nil, anth, 400, "mcp_servers is not an array"},
		// Anthropic: allowed when the grant lists them.
		{"web search allowed", "anthropic", messages, msg(`{"type":"web_search_20250305","name":"web_search"}`), nil, anthSearch, 200, ""},
		{"every tool allowed", "anthropic", messages, msg(`{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"code_execution_20250825","name":"code_execution"},{"type":"mcp_toolset","mcp_server_name":"x"}`,
			`,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}]`), beta(claudeCodeBetas + ",mcp-client-2025-04-04"), anthAll, 200, ""},
		// Anthropic: guarded betas.
		{"the MCP connector's beta", "anthropic", messages, msg(fn), beta(claudeCodeBetas, "mcp-client-2025-11-20"), anth, 403,
			`flock proxy: agent 3: the request asks for the beta feature "mcp-client-2025-11-20" (its anthropic-beta header), which turns on the MCP connector: the provider connects to the MCP servers the request names, outside the agent's egress; allow it with betas: [mcp-client-2025-11-20] in agents[id=3].models.anthropic`},
		{"a beta in a list", "anthropic", messages, msg(fn), beta("claude-code-20250219, code-execution-2025-05-22"), anth, 403, `"code-execution-2025-05-22"`},
		{"a beta in upper case", "anthropic", messages, msg(fn), beta("Web-Fetch-2025-09-10"), anth, 403, `"web-fetch-2025-09-10"`},
		{"skills' beta", "anthropic", messages, msg(fn), beta("skills-2025-10-02"), anthAll, 403, "allow it with betas: [mcp-client-2025-04-04, skills-2025-10-02]"},
		{"the files API's beta", "anthropic", messages, msg(fn), beta("files-api-2025-04-14"), anth, 403, "files stored with the provider"},
		{"a beta listed", "anthropic", messages, msg(fn), beta("mcp-client-2025-04-04"), anthAll, 200, ""},
		{"another version of a beta listed", "anthropic", messages, msg(fn), beta("mcp-client-2025-11-20"), anthAll, 403, "betas: [mcp-client-2025-04-04, mcp-client-2025-11-20]"},
		// OpenAI's Responses.
		{"functions", "openai", responses, resp(oaiFn + `,{"type":"custom","name":"x"}`), nil, oai, 200, ""},
		{"the client's own tools", "openai", responses, resp(`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"},{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"}`), nil, oai, 200, ""},
		{"web search (Responses)", "openai", responses, resp(oaiFn + `,{"type":"web_search"}`), nil, oai, 403,
			`flock proxy: agent 3: the request asks for the provider's web_search tool (tools[1].type "web_search"), which reaches the network from the provider, outside the agent's egress, and is charged per search; allow it with server_tools: [web_search] in agents[id=3].models.openai`},
		{"web search preview", "openai", responses, resp(`{"type":"web_search_preview"}`), nil, oai, 403, "server_tools: [web_search]"},
		{"web search, dated", "openai", responses, resp(`{"type":"web_search_preview_2025_03_11"}`), nil, oai, 403, "server_tools: [web_search]"},
		{"file search", "openai", responses, resp(`{"type":"file_search","vector_store_ids":["vs_1"]}`), nil, oai, 403, "file_search tool (tools[0].type \"file_search\"), which searches the files stored with the provider's account"},
		{"code interpreter", "openai", responses, resp(`{"type":"code_interpreter","container":{"type":"auto"}}`), nil, oai, 403, "the provider's code_execution tool (tools[0].type \"code_interpreter\")"},
		{"remote MCP", "openai", responses, resp(`{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com"}`), nil, oai, 403, "server_tools: [mcp]"},
		{"image generation", "openai", responses, resp(`{"type":"image_generation"}`), nil, oai, 403, "image_generation tool (tools[0].type \"image_generation\"), which is charged per image"},
		{"a Responses tool flock does not know", "openai", responses, resp(`{"type":"computer"}`), nil, oaiAll, 403, `a tool of type "computer" (tools[0]), which flock does not know`},
		{"a Responses tool with no type", "openai", responses, resp(`{"name":"x"}`), nil, oaiAll, 403, `a tool with no type (tools[0])`},
		{"every Responses tool allowed", "openai", responses, resp(`{"type":"web_search"},{"type":"file_search"},{"type":"code_interpreter"},{"type":"mcp"},{"type":"image_generation"}`), nil, oaiAll, 200, ""},
		{"a key twice in a Responses tool", "openai", responses, resp(`{"type":"function","TYPE":"web_search"}`), nil, oai, 400, "is in the request body twice"},
		// OpenAI's Chat Completions.
		{"chat functions", "openai", chat, chatReq(chatFn + `,{"type":"custom","custom":{"name":"x"}}`), nil, oai, 200, ""},
		{"chat web_search_options", "openai", chat, chatReq(chatFn, `,"web_search_options":{}`), nil, oai, 403, "the provider's web_search tool (web_search_options)"},
		{"chat web_search_options null", "openai", chat, chatReq(chatFn, `,"web_search_options":null`), nil, oai, 200, ""},
		{"chat web_search_options allowed", "openai", chat, chatReq(chatFn, `,"web_search_options":{}`), nil, oaiAll, 200, ""},
		{"a search model", "openai", chat, `{"model":"gpt-4o-search-preview","messages":[{"role":"user","content":"hi"}]}`, nil, oai, 403, `the model "gpt-4o-search-preview", which searches the web on every request`},
		{"a server tool in chat", "openai", chat, chatReq(`{"type":"web_search"}`), nil, oaiAll, 403, `a tool of type "web_search" (tools[0]), which flock does not know`},
		{"a chat tool with no type", "openai", chat, chatReq(`{"function":{"name":"x"}}`), nil, oai, 403, `a tool with no type (tools[0])`},
	} {
		status, line := judgeOf(t, tc.kind, tc.path, tc.body, tc.h, tc.g)
		if status != tc.status || !strings.Contains(line, tc.want) {
			t.Errorf("%s: %d %q\nwant %d with %q", tc.name, status, line, tc.status, tc.want)
		}
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
	uses := func(m map[ServerTool]uint64) ToolUses {
		var u ToolUses
		for t, n := range m {
			u[toolIndex(t)] = n
		}
		return u
	}
	openaiAll := uses(map[ServerTool]uint64{ToolWebSearch: 2, ToolFileSearch: 1, ToolCodeExecution: 1, ToolMCP: 1, ToolImageGeneration: 1})
	for _, tc := range []struct {
		name   string
		kind   string
		stream bool
		answer string
		want   ToolUses
	}{
		{"an Anthropic stream", "anthropic", true, anthropic, uses(map[ServerTool]uint64{ToolWebSearch: 3, ToolWebFetch: 1})},
		{"an Anthropic stream cut before its usage", "anthropic", true, anthropicCut, uses(map[ServerTool]uint64{ToolWebSearch: 1, ToolWebFetch: 1, ToolCodeExecution: 1, ToolMCP: 1})},
		{"an Anthropic answer", "anthropic", false, anthropicJSON, uses(map[ServerTool]uint64{ToolWebSearch: 2, ToolCodeExecution: 1})},
		{"a Responses stream", "openai", true, responses, openaiAll},
		{"a Responses stream cut", "openai", true, responsesCut, openaiAll},
		{"a Responses answer", "openai", false, responsesJSON, openaiAll},
		{"an Anthropic stream without tools", "anthropic", true, start + text + client, ToolUses{}},
	} {
		for size := 1; size <= len(tc.answer); size += 1 + size/16 {
			m := NewMeter(kindOf(t, tc.kind))
			if tc.stream {
				m.Stream()
			}
			for i := 0; i < len(tc.answer); i += size {
				m.Write([]byte(tc.answer[i:min(i+size, len(tc.answer))]))
			}
			m.End()
			if got := m.Usage().ServerTools; got != tc.want {
				t.Errorf("%s in pieces of %d: %v, want %v", tc.name, size, got.Map(), tc.want.Map())
				break
			}
		}
	}
}

// A grant allows no provider-side tool and no guarded beta unless it
// lists them; every other beta passes (Claude Code's among them).
func TestGrantAllowsWhatItLists(t *testing.T) {
	none := Allowed{Provider: "anthropic"}
	some := Allowed{Provider: "anthropic", Tools: []ServerTool{ToolWebFetch}, Betas: []string{"mcp-client-2025-11-20"}}
	for _, tool := range ServerTools {
		if none.AllowsTool(tool) || some.AllowsTool(tool) != (tool == ToolWebFetch) {
			t.Errorf("%s: allowed by a grant that lists none: %v; by one that lists web_fetch: %v", tool, none.AllowsTool(tool), some.AllowsTool(tool))
		}
	}
	for _, tc := range []struct {
		beta       string
		none, some bool
	}{
		{"claude-code-20250219", true, true},
		{"interleaved-thinking-2025-05-14", true, true},
		{"fine-grained-tool-streaming-2025-05-14", true, true},
		{"context-management-2025-06-27", true, true},
		{"oauth-2025-04-20", true, true},
		{"mcp-client-2025-11-20", false, true},
		{"mcp-client-2025-04-04", false, false},
		{"code-execution-2025-08-25", false, false},
		{"web-fetch-2025-09-10", false, false},
		{"skills-2025-10-02", false, false},
		{"files-api-2025-04-14", false, false},
	} {
		h := http.Header{"Anthropic-Beta": {tc.beta}}
		if (checkBetas(h, none) == nil) != tc.none || (checkBetas(h, some) == nil) != tc.some {
			t.Errorf("%s: allowed by a grant that lists none: %v, want %v; by one that lists mcp-client-2025-11-20: %v, want %v",
				tc.beta, checkBetas(h, none) == nil, tc.none, checkBetas(h, some) == nil, tc.some)
		}
	}
	for _, name := range Names() {
		k, _ := Lookup(name)
		for _, tool := range k.ServerTools {
			if !slices.Contains(ServerTools[:], tool) {
				t.Errorf("kind %s offers %s, which is not in ServerTools", name, tool)
			}
		}
	}
}
