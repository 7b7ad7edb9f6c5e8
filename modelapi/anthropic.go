package modelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/flockrun/flock/wire"
)

// Anthropic's Messages API: its key in x-api-key, usage in the answer's
// usage (a stream's message_start, then cumulative message_delta counts),
// provider-side tools in tools[], mcp_servers and container.skills, and
// the betas that turn them on in anthropic-beta.
func init() {
	Register(Kind{
		Name:       "anthropic",
		About:      "the Messages API",
		ExampleURL: "https://api.anthropic.com",
		BaseURLEnv: "ANTHROPIC_BASE_URL",
		KeyEnv:     "ANTHROPIC_API_KEY",
		Auth:       func(h http.Header, key string) { h.Set("X-Api-Key", key) },
		Endpoints: []Endpoint{
			{Method: http.MethodPost, Path: "/v1/messages", Judge: anthropicMessages, Spends: true},
			{Method: http.MethodPost, Path: "/v1/messages/count_tokens", Judge: anyObject},
			{Method: http.MethodGet, Path: "/v1/models"},
			{Method: http.MethodGet, Path: "/v1/models/{id}"},
		},
		Usage: UsageFormat{
			Paths: []UsagePath{{Keys: []string{"usage"}}, {Keys: []string{"message", "usage"}, Start: true}},
			New:   func() UsageReader { return &anthropicUsage{} },
		},
		Error: func(status int, msg string) any {
			return map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg}}
		},
		ServerTools: anthropicOffers,
		Betas:       anthropicBetas,
		Probe: Probe{List: "/v1/models", Send: "/v1/messages",
			Ask:  `{"model":"flock-audit-probe","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
			Tool: `{"model":"flock-audit-probe","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1}]}`},
	})
}

var anthropicOffers = []ServerTool{ToolWebSearch, ToolWebFetch, ToolCodeExecution, ToolMCP}

// anthropicMessages: a stream is a boolean, max_tokens (which the API
// requires) is the most the answer may write, and the provider-side
// tools and betas are the grant's (anthropicTools).
func anthropicMessages(b *Body, h http.Header, g Allowed) (Plan, error) {
	if _, err := b.boolOf("stream"); err != nil {
		return Plan{}, err
	}
	max, _, err := b.countOf("max_tokens", MaxTokens)
	if err != nil {
		return Plan{}, err
	}
	return Plan{MaxOutput: max}, anthropicTools(b, h, g)
}

// anthropicUsage reads Anthropic's usage objects: each field as last
// reported (message_delta's counts are cumulative, and report some
// fields only), the part of the cache writes that went to the 1-hour
// cache (usage.cache_creation, priced apart), and usage.server_tool_use's
// counts.
type anthropicUsage struct {
	t     wire.Tokens
	tools ToolUses
}

func (a *anthropicUsage) Take(obj []byte) bool {
	var u struct {
		InputTokens              *uint64 `json:"input_tokens"`
		OutputTokens             *uint64 `json:"output_tokens"`
		CacheCreationInputTokens *uint64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *uint64 `json:"cache_read_input_tokens"`
		CacheCreation            *struct {
			Ephemeral1h *uint64 `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
		ServerToolUse *struct {
			WebSearchRequests     *uint64 `json:"web_search_requests"`
			WebFetchRequests      *uint64 `json:"web_fetch_requests"`
			CodeExecutionRequests *uint64 `json:"code_execution_requests"`
		} `json:"server_tool_use"`
	}
	if json.Unmarshal(obj, &u) != nil {
		return false
	}
	any := set(&a.t.InputTokens, u.InputTokens)
	any = set(&a.t.OutputTokens, u.OutputTokens) || any
	any = set(&a.t.CacheWriteTokens, u.CacheCreationInputTokens) || any
	any = set(&a.t.CacheReadTokens, u.CacheReadInputTokens) || any
	if c := u.CacheCreation; c != nil {
		any = set(&a.t.CacheWriteLongTokens, c.Ephemeral1h) || any
	}
	if t := u.ServerToolUse; t != nil {
		// Counts, not tokens: they say nothing of whether the usage
		// was reported.
		set(&a.tools[toolIndex(ToolWebSearch)], t.WebSearchRequests)
		set(&a.tools[toolIndex(ToolWebFetch)], t.WebFetchRequests)
		set(&a.tools[toolIndex(ToolCodeExecution)], t.CodeExecutionRequests)
	}
	return any
}

func (a *anthropicUsage) Usage() (wire.Tokens, ToolUses) { return a.t, a.tools }

// anthropicType is the error type Anthropic's API gives a status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	return "api_error"
}

// anthropicClientTool is a tool Anthropic defines and the client runs
// (bash, the text editor, computer use, memory): its calls come back to
// the client like its own tools'.
var anthropicClientTool = regexp.MustCompile(`^(bash|text_editor|computer|memory)_[0-9]{8}$`)

// anthropicToolKind says what a Messages tool's type is: the client's
// own or one Anthropic defines for the client to run (client), a server
// tool (tool), or neither (unknown).
func anthropicToolKind(typ string) (tool ServerTool, client bool) {
	switch {
	case typ == "" || typ == "custom" || anthropicClientTool.MatchString(typ):
		return "", true
	case strings.HasPrefix(typ, "web_search_"):
		return ToolWebSearch, false
	case strings.HasPrefix(typ, "web_fetch_"):
		return ToolWebFetch, false
	case strings.HasPrefix(typ, "code_execution_"), strings.HasPrefix(typ, "bash_code_execution"), strings.HasPrefix(typ, "text_editor_code_execution"):
		return ToolCodeExecution, false
	case typ == "mcp_toolset":
		return ToolMCP, false
	case strings.HasPrefix(typ, "tool_search_tool_"):
		// Anthropic's tool search looks through the request's own tool
		// definitions: it reaches nothing and runs nothing.
		return "", true
	}
	return "", false
}

// anthropicTools judges a Messages request's tools, MCP servers,
// container skills and beta headers against grant g.
func anthropicTools(b *Body, h http.Header, g Allowed) error {
	err := eachTool(b, func(i int, typ string) error {
		t, client := anthropicToolKind(typ)
		switch {
		case client:
			return nil
		case t != "":
			return checkTool(g, t, fmt.Sprintf("tools[%d].type %s", i, Quoted(typ)))
		}
		return unknownTool(g, i, typ, toolsUse(anthropicOffers, `no type or "custom", and Anthropic's bash, text_editor, computer and memory`))
	})
	if err != nil {
		return err
	}
	if m, ok := b.get("mcp_servers"); ok {
		servers, err := b.elements(m, "mcp_servers")
		if err != nil {
			return err
		}
		if len(servers) > 0 {
			if err := checkTool(g, ToolMCP, "mcp_servers"); err != nil {
				return err
			}
		}
	}
	if m, ok := b.get("container"); ok && len(b.value(m)) > 0 && b.value(m)[0] == '{' {
		c, err := b.object(m, "container")
		if err != nil {
			return err
		}
		if s, ok := b.lookup(c, "skills"); ok {
			skills, err := b.elements(s, "container.skills")
			if err != nil {
				return err
			}
			if len(skills) > 0 {
				if err := checkTool(g, ToolCodeExecution, "container.skills, which run in the code execution container"); err != nil {
					return err
				}
			}
		}
	}
	return checkBetas(h, g)
}

// anthropicGuarded are the anthropic-beta prefixes that turn on what a
// grant must list, and what each turns on.
var anthropicGuarded = [][2]string{
	{"mcp-client-", "which turns on the MCP connector: the provider connects to the MCP servers the request names, outside the agent's egress"},
	{"code-execution-", "which turns on code execution in the provider's container, outside the agent's box"},
	{"web-fetch-", "which turns on web fetch: the provider fetches any URL, outside the agent's egress"},
	{"skills-", "which turns on skills, code run in the provider's container"},
	{"files-api-", "which turns on files stored with the provider, which the gateway does not carry and cannot see"},
}

// anthropicBetas are anthropicGuarded's prefixes: the kind's Betas.
var anthropicBetas = func() []string {
	out := make([]string, len(anthropicGuarded))
	for i, g := range anthropicGuarded {
		out[i] = g[0]
	}
	return out
}()

// checkBetas refuses an anthropic-beta value that turns on a guarded
// feature (its Betas) unless g lists it; every other passes
// (Claude Code sends several). The header may come more than once, each
// a comma-separated list.
func checkBetas(h http.Header, g Allowed) error {
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			b = strings.ToLower(strings.Trim(b, " \t"))
			if b == "" || !Guarded(anthropicBetas, b) || slices.Contains(g.Betas, b) {
				continue
			}
			why := ""
			for _, p := range anthropicGuarded {
				if strings.HasPrefix(b, p[0]) {
					why = p[1]
				}
			}
			list := append(append([]string(nil), g.Betas...), b)
			return &NotAllowed{provider: g.Provider, asks: "the beta feature " + Quoted(b) + " (its anthropic-beta header)", why: why,
				allow: "betas: [" + strings.Join(list, ", ") + "]"}
		}
	}
	return nil
}
