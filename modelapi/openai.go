package modelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/flockrun/flock/wire"
)

// The OpenAI API and the servers compatible with it (Ollama, vLLM,
// llama.cpp's server): its key in Authorization: Bearer, usage in the
// answer's usage (a streamed Chat Completion's only when asked: the
// gateway asks), provider-side tools in the Responses API's tools[] and
// Chat Completions' web_search_options.
func init() {
	Register(Kind{
		Name:       "openai",
		About:      "the OpenAI API and servers compatible with it: Ollama, vLLM",
		ExampleURL: "https://api.openai.com/v1",
		BaseURLEnv: "OPENAI_BASE_URL",
		KeyEnv:     "OPENAI_API_KEY",
		Auth:       func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		Endpoints: []Endpoint{
			{Method: http.MethodPost, Path: "/chat/completions", Judge: openaiChat, Spends: true},
			{Method: http.MethodPost, Path: "/completions", Judge: openaiCompletions, Spends: true},
			{Method: http.MethodPost, Path: "/embeddings", Judge: anyObject, Spends: true},
			{Method: http.MethodPost, Path: "/responses", Judge: openaiResponses, Spends: true},
			{Method: http.MethodGet, Path: "/models"},
			{Method: http.MethodGet, Path: "/models/{id}"},
		},
		Usage: UsageFormat{
			Paths: []UsagePath{{Keys: []string{"usage"}}, {Keys: []string{"response", "usage"}}},
			New:   func() UsageReader { return &openaiUsage{} },
		},
		Error: func(status int, msg string) any {
			return map[string]any{"error": map[string]any{"message": msg, "type": openaiType(status), "param": nil, "code": openaiCode(status)}}
		},
		ServerTools: openaiOffers,
		Probe: Probe{List: "/models", Send: "/chat/completions",
			Ask:  `{"model":"flock-audit-probe","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
			Tool: `{"model":"flock-audit-probe","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`},
	})
}

var openaiOffers = []ServerTool{ToolWebSearch, ToolCodeExecution, ToolMCP, ToolFileSearch, ToolImageGeneration}

// openaiChat: a Chat Completion's maximum, its usage when streamed, and
// no provider-side tool its grant does not allow (chatTools).
func openaiChat(b *Body, _ http.Header, g Allowed) (Plan, error) {
	p, err := openaiMax(b, g.Limited, "max_completion_tokens", "max_completion_tokens", "max_tokens")
	if err != nil {
		return Plan{}, err
	}
	if err := includeUsage(b, &p); err != nil {
		return Plan{}, err
	}
	return p, chatTools(b, g)
}

// openaiCompletions: the legacy API writes max_tokens (16 unless set) for
// each of best_of or n choices.
func openaiCompletions(b *Body, _ http.Header, _ Allowed) (Plan, error) {
	max, set, err := b.countOf("max_tokens", MaxTokens)
	if err != nil {
		return Plan{}, err
	}
	if !set {
		max = completionsDefault
	}
	n, err := choices(b, "n", "best_of")
	if err != nil {
		return Plan{}, err
	}
	p := Plan{MaxOutput: max * n}
	return p, includeUsage(b, &p)
}

// includeUsage makes a streamed Chat Completion (or Completion) report
// its usage: OpenAI streams carry usage only when the request sets
// stream_options.include_usage, and a client that leaves it out (or sets
// it false) would spend tokens no limit sees. The gateway sets it; the
// client then receives one more chunk at the end, with the usage and no
// choices, as any client that asked for it does.
func includeUsage(b *Body, p *Plan) error {
	stream, err := b.boolOf("stream")
	if err != nil || !stream {
		return err
	}
	opts := []byte(`{"include_usage":true`)
	if m, ok := b.get("stream_options"); ok {
		ms, err := b.object(m, "stream_options")
		if err != nil {
			return err
		}
		for _, o := range ms {
			if o.key == "include_usage" {
				b.lookup(ms, "include_usage") // refused if written otherwise
				if string(b.value(o)) == "true" && len(ms) > 0 {
					return nil // as asked
				}
				continue
			}
			opts = append(append(opts, ','), b.raw[o.kstart:o.end]...)
		}
	}
	p.Edits = append(p.Edits, Edit{Key: "stream_options", Value: append(opts, '}')})
	return nil
}

// openaiResponses: run in the foreground only (a background response's
// usage would come with a later retrieval the gateway does not carry),
// with no provider-side tool its grant does not allow (responsesTools).
func openaiResponses(b *Body, _ http.Header, g Allowed) (Plan, error) {
	if _, err := b.boolOf("stream"); err != nil {
		return Plan{}, err
	}
	bg, err := b.boolOf("background")
	if err != nil {
		return Plan{}, err
	}
	if bg {
		return Plan{}, BadBody("a Responses request with background: true spends tokens the gateway cannot meter; run it in the foreground (stream: true for long ones)")
	}
	p, err := openaiMax(b, g.Limited, "max_output_tokens", "max_output_tokens")
	if err != nil {
		return Plan{}, err
	}
	return p, responsesTools(b, g)
}

// openaiMax reads the maximum of output a request names (the largest of
// keys, times its choices); when it names none and the grant counts
// tokens, it sets set to DefaultMaxOutput.
func openaiMax(b *Body, limited bool, set string, keys ...string) (Plan, error) {
	var most uint64
	named := false
	for _, k := range keys {
		n, ok, err := b.countOf(k, MaxTokens)
		if err != nil {
			return Plan{}, err
		}
		if ok {
			most, named = max(most, n), true
		}
	}
	n, err := choices(b, "n")
	if err != nil {
		return Plan{}, err
	}
	p := Plan{MaxOutput: most * n}
	if !named {
		p.MaxOutput = DefaultMaxOutput * n
		if limited {
			p.Edits = append(p.Edits, Edit{Key: set, Value: []byte(strconv.Itoa(DefaultMaxOutput))})
		}
	}
	return p, nil
}

// openaiClientTools are the tool types of the Responses API the client
// runs itself.
var openaiClientTools = []string{"function", "custom", "computer_use_preview", "local_shell", "shell", "apply_patch"}

// openaiResponseTool says what a Responses tool's type is, as
// anthropicToolKind does.
func openaiResponseTool(typ string) (tool ServerTool, client bool) {
	for _, c := range openaiClientTools {
		if typ == c {
			return "", true
		}
	}
	switch {
	case typ == "web_search" || typ == "web_search_preview" || strings.HasPrefix(typ, "web_search_2") || strings.HasPrefix(typ, "web_search_preview_2"):
		return ToolWebSearch, false
	case typ == "file_search":
		return ToolFileSearch, false
	case typ == "code_interpreter":
		return ToolCodeExecution, false
	case typ == "mcp":
		return ToolMCP, false
	case typ == "image_generation":
		return ToolImageGeneration, false
	}
	return "", false
}

// responsesTools judges a Responses request's tools against grant g.
func responsesTools(b *Body, g Allowed) error {
	return eachTool(b, func(i int, typ string) error {
		t, client := openaiResponseTool(typ)
		switch {
		case client:
			return nil
		case t != "":
			return checkTool(g, t, fmt.Sprintf("tools[%d].type %s", i, Quoted(typ)))
		}
		return unknownTool(g, i, typ, toolsUse(openaiOffers, strings.Join(quoteAll(openaiClientTools), ", ")))
	})
}

// chatTools judges a Chat Completion's tools (the client's functions
// only: Chat Completions has no server tools), its web_search_options
// and its model: OpenAI's search models search the web on every request.
func chatTools(b *Body, g Allowed) error {
	err := eachTool(b, func(i int, typ string) error {
		if typ == "function" || typ == "custom" {
			return nil
		}
		return unknownTool(g, i, typ, `"function" or "custom" (Chat Completions' only provider tool is web search, through web_search_options; the Responses API has the others)`)
	})
	if err != nil {
		return err
	}
	if m, ok := b.get("web_search_options"); ok && string(b.value(m)) != "null" {
		if err := checkTool(g, ToolWebSearch, "web_search_options"); err != nil {
			return err
		}
	}
	if m, ok := b.get("model"); ok {
		model, err := b.stringOf(m, "model")
		if err != nil {
			return err
		}
		if strings.Contains(model, "-search-") {
			return checkTool(g, ToolWebSearch, "the model "+Quoted(model)+", which searches the web on every request")
		}
	}
	return nil
}

// openaiUsage reads the usage of Chat Completions (prompt_tokens,
// completion_tokens) and of Responses (input_tokens, output_tokens), the
// parts of the input read from the cache and written to it in their
// details (cached_tokens, cache_write_tokens): both include them in the
// input, and newer models charge a cache write beside it.
type openaiUsage struct{ prompt, cached, written, out uint64 }

func (o *openaiUsage) Take(obj []byte) bool {
	var u struct {
		PromptTokens        *uint64             `json:"prompt_tokens"`
		CompletionTokens    *uint64             `json:"completion_tokens"`
		InputTokens         *uint64             `json:"input_tokens"`
		OutputTokens        *uint64             `json:"output_tokens"`
		PromptTokensDetails *openaiInputDetails `json:"prompt_tokens_details"`
		InputTokensDetails  *openaiInputDetails `json:"input_tokens_details"`
	}
	if json.Unmarshal(obj, &u) != nil {
		return false
	}
	any := set(&o.prompt, u.PromptTokens)
	any = set(&o.prompt, u.InputTokens) || any
	any = set(&o.out, u.CompletionTokens) || any
	any = set(&o.out, u.OutputTokens) || any
	for _, d := range []*openaiInputDetails{u.PromptTokensDetails, u.InputTokensDetails} {
		if d != nil {
			any = set(&o.cached, d.CachedTokens) || any
			any = set(&o.written, d.CacheWriteTokens) || any
		}
	}
	return any
}

type openaiInputDetails struct {
	CachedTokens     *uint64 `json:"cached_tokens"`
	CacheWriteTokens *uint64 `json:"cache_write_tokens"`
}

func (o *openaiUsage) Usage() (wire.Tokens, ToolUses) {
	cached := min(o.cached, o.prompt)
	written := min(o.written, o.prompt-cached)
	return wire.Tokens{InputTokens: o.prompt - cached - written, OutputTokens: o.out, CacheReadTokens: cached, CacheWriteTokens: written}, ToolUses{}
}

// openaiType is the error type OpenAI's API gives a status.
func openaiType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func openaiCode(status int) string {
	switch status {
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusBadGateway:
		return "upstream_unreachable"
	}
	return "invalid_request"
}
