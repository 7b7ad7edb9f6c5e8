package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/flockrun/flock/spec"
)

// Usage is what a provider reported of one request, in flock's terms:
// input tokens not read from a cache, output tokens, and cache reads and
// writes.
type Usage struct {
	Input, Output, CacheRead, CacheWrite uint64
	Reported                             bool // the answer carried a usage at all
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

// carrier is where a usage sits in an answer or an event: at the top
// (a JSON answer; Anthropic's message_delta; OpenAI's last chunk), in
// the message (Anthropic's message_start) or in the response (OpenAI's
// response.completed).
type carrier struct {
	Usage    *rawUsage `json:"usage"`
	Message  *carrier  `json:"message"`
	Response *carrier  `json:"response"`
}

// meter accumulates what one answer reports, event by event. Both APIs
// report totals so far (Anthropic's message_delta counts are cumulative),
// so a later figure replaces an earlier one of the same field.
type meter struct {
	kind spec.ProviderKind
	// Anthropic's fields as last reported.
	in, out, cacheRead, cacheWrite uint64
	// OpenAI's.
	prompt, cached uint64
	reported       bool
}

// add reads one JSON document (an answer, or one event's data) and keeps
// the usage it reports; anything else is ignored.
func (m *meter) add(doc []byte) {
	if !hasUsage(doc) {
		return // most events of a stream: text deltas, or "usage":null
	}
	var c carrier
	if json.Unmarshal(doc, &c) != nil {
		return
	}
	for _, u := range []*rawUsage{c.Usage, usageOf(c.Message), usageOf(c.Response)} {
		if u != nil {
			m.take(u)
		}
	}
}

// hasUsage says whether doc has a "usage" key whose value is an object:
// a cheap look before the JSON is decoded.
func hasUsage(doc []byte) bool {
	for {
		i := bytes.Index(doc, []byte(`"usage"`))
		if i < 0 {
			return false
		}
		doc = bytes.TrimLeft(doc[i+len(`"usage"`):], " \t\r\n")
		if len(doc) > 0 && doc[0] == ':' {
			if v := bytes.TrimLeft(doc[1:], " \t\r\n"); len(v) > 0 && v[0] == '{' {
				return true
			}
		}
	}
}

func usageOf(c *carrier) *rawUsage {
	if c == nil {
		return nil
	}
	return c.Usage
}

func (m *meter) take(u *rawUsage) {
	set := func(dst *uint64, v *uint64) {
		if v != nil {
			*dst = *v
			m.reported = true
		}
	}
	switch m.kind {
	case spec.KindAnthropic:
		set(&m.in, u.InputTokens)
		set(&m.out, u.OutputTokens)
		set(&m.cacheWrite, u.CacheCreationInputTokens)
		set(&m.cacheRead, u.CacheReadInputTokens)
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
}

// usage is what the answer reported so far.
func (m *meter) usage() Usage {
	if m.kind == spec.KindAnthropic {
		return Usage{Input: m.in, Output: m.out, CacheRead: m.cacheRead, CacheWrite: m.cacheWrite, Reported: m.reported}
	}
	cached := min(m.cached, m.prompt)
	return Usage{Input: m.prompt - cached, Output: m.out, CacheRead: cached, Reported: m.reported}
}

// maxLine bounds one line of a stream the meter reads; a longer one
// (never a usage event, which is short) is passed on unread.
const maxLine = 1 << 20

// sse reads a server-sent event stream as it passes, feeding each data
// line to the meter: the bytes themselves go on unchanged and unheld.
type sse struct {
	m       *meter
	line    []byte
	tooLong bool
}

func (s *sse) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keep(p)
			return
		}
		s.keep(p[:i])
		if !s.tooLong {
			s.dataLine(bytes.TrimSuffix(s.line, []byte{'\r'}))
		}
		s.line, s.tooLong = s.line[:0], false
		p = p[i+1:]
	}
}

func (s *sse) keep(p []byte) {
	if s.tooLong {
		return
	}
	if len(s.line)+len(p) > maxLine {
		s.tooLong = true
		return
	}
	s.line = append(s.line, p...)
}

// dataLine reads "data: {...}"; other fields (event:, id:, comments)
// carry no usage. Both APIs put each event's JSON on one data line.
func (s *sse) dataLine(l []byte) {
	d, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	d = bytes.TrimPrefix(d, []byte(" "))
	if len(d) > 0 && d[0] == '{' {
		s.m.add(d)
	}
}
