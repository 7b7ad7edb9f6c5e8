package gateway

import (
	"encoding/json"

	"github.com/flockrun/flock/spec"
)

// Usage is what a provider reported of one request, in flock's terms:
// input tokens not read from a cache, output tokens, and cache reads and
// writes; and the provider-side tools it ran (ServerTools).
type Usage struct {
	Input, Output, CacheRead, CacheWrite uint64
	ServerTools                          ToolUses
	Reported                             bool // the answer carried a usage at all
	Estimated                            bool // the answer ended before its usage: estimated (meter.estimate)
}

// Tokens is every token of u.
func (u Usage) Tokens() uint64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// rawUsage is a usage object of either API; a field absent is nil, so an
// event that reports some fields (Anthropic's message_delta) leaves the
// others as an earlier event set them.
type rawUsage struct {
	// Anthropic.
	InputTokens              *uint64 `json:"input_tokens"`
	OutputTokens             *uint64 `json:"output_tokens"`
	CacheCreationInputTokens *uint64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *uint64 `json:"cache_read_input_tokens"`
	// ServerToolUse counts Anthropic's server tools' uses so far.
	ServerToolUse *struct {
		WebSearchRequests     *uint64 `json:"web_search_requests"`
		WebFetchRequests      *uint64 `json:"web_fetch_requests"`
		CodeExecutionRequests *uint64 `json:"code_execution_requests"`
	} `json:"server_tool_use"`
	// OpenAI's Chat Completions (prompt, completion) and Responses
	// (input, output, with the cached part in the details).
	PromptTokens        *uint64 `json:"prompt_tokens"`
	CompletionTokens    *uint64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *uint64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens *uint64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// meter reads one answer as it passes: a stream event by event, JSON
// whole, keeping the usage each reports (both APIs report totals so far:
// Anthropic's message_delta counts are cumulative, so a later figure
// replaces an earlier one of the same field) and what the model wrote,
// for an estimate when no usage comes.
type meter struct {
	kind spec.ProviderKind
	doc  docScanner
	sse  *sse // nil: the answer is one JSON document
	// Anthropic's fields as last reported.
	in, out, cacheRead, cacheWrite uint64
	serverTools                    ToolUses // usage.server_tool_use's
	// OpenAI's.
	prompt, cached uint64
	reported       bool
	final          bool // a usage that ends the answer was read (not Anthropic's message_start alone)
}

func newMeter(kind spec.ProviderKind) meter { return meter{kind: kind} }

// stream makes m read a stream of server-sent events.
func (m *meter) stream() { m.sse = &sse{doc: &m.doc} }

// write reads the answer's next bytes.
func (m *meter) write(p []byte) {
	if m.sse != nil {
		m.sse.write(p)
	} else {
		m.doc.write(p)
	}
	m.drain()
}

// end reads the end of the answer: a last event with no empty line after
// it.
func (m *meter) end() {
	if m.sse != nil {
		m.sse.endEvent()
	}
	m.drain()
}

// drain keeps the usages the scanner found.
func (m *meter) drain() {
	for _, f := range m.doc.usages {
		var u rawUsage
		if json.Unmarshal(f.obj, &u) != nil {
			continue
		}
		if m.take(&u) && !f.start {
			m.final = true
		}
	}
	m.doc.usages = m.doc.usages[:0]
}

// take keeps the fields of u; it says whether u had any.
func (m *meter) take(u *rawUsage) bool {
	any := false
	set := func(dst *uint64, v *uint64) {
		if v != nil {
			*dst = *v
			m.reported, any = true, true
		}
	}
	switch m.kind {
	case spec.KindAnthropic:
		set(&m.in, u.InputTokens)
		set(&m.out, u.OutputTokens)
		set(&m.cacheWrite, u.CacheCreationInputTokens)
		set(&m.cacheRead, u.CacheReadInputTokens)
		if t := u.ServerToolUse; t != nil {
			// Counts, not tokens: they say nothing of whether the
			// usage was reported.
			tool := func(st spec.ServerTool, v *uint64) {
				if v != nil {
					m.serverTools[toolIndex(st)] = *v
				}
			}
			tool(spec.ToolWebSearch, t.WebSearchRequests)
			tool(spec.ToolWebFetch, t.WebFetchRequests)
			tool(spec.ToolCodeExecution, t.CodeExecutionRequests)
		}
	default:
		// Chat Completions' prompt_tokens, or Responses' input_tokens:
		// both include the cached part.
		set(&m.prompt, u.PromptTokens)
		set(&m.prompt, u.InputTokens)
		set(&m.out, u.CompletionTokens)
		set(&m.out, u.OutputTokens)
		if d := u.PromptTokensDetails; d != nil {
			set(&m.cached, d.CachedTokens)
		}
		if d := u.InputTokensDetails; d != nil {
			set(&m.cached, d.CachedTokens)
		}
	}
	return any
}

// usage is what the answer reported so far.
func (m *meter) usage() Usage {
	// The server tools: the most that the usage reported (Anthropic's)
	// or the tool calls that passed counted.
	tools := m.doc.tools.most()
	for i, n := range m.serverTools {
		tools[i] = max(tools[i], n)
	}
	if m.kind == spec.KindAnthropic {
		return Usage{Input: m.in, Output: m.out, CacheRead: m.cacheRead, CacheWrite: m.cacheWrite, ServerTools: tools, Reported: m.reported}
	}
	cached := min(m.cached, m.prompt)
	return Usage{Input: m.prompt - cached, Output: m.out, CacheRead: cached, ServerTools: tools, Reported: m.reported}
}

// BytesPerToken is the estimate of text a token stands for when an
// answer ends before its usage: fewer than the four bytes of English or
// code, so that the estimate is at least what the client received.
const BytesPerToken = 3

// estimate is u for an answer that ended without its final usage (a
// stream the client or the provider cut, or a provider that sent none):
// its output at least the text that passed (one token per BytesPerToken
// bytes, and one per event that carried text) up to the request's
// maximum (most; 0: none known), its input the request's estimate when
// the answer said nothing of it.
func (m *meter) estimate(u Usage, input, most uint64) Usage {
	text := uint64(m.doc.textBytes+BytesPerToken-1) / BytesPerToken
	if m.sse != nil {
		text = max(text, uint64(m.sse.events))
	}
	if most > 0 {
		text = min(text, most) // a provider writes no more than asked
	}
	u.Output = max(u.Output, text)
	if u.Input+u.CacheRead+u.CacheWrite == 0 {
		u.Input = input
	}
	u.Estimated = true
	return u
}
