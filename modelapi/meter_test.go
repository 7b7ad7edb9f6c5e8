package modelapi

// Tier: unit.

import (
	"strings"
	"testing"

	"github.com/flockrun/flock/wire"
)

// Streams as the APIs write them, cut into pieces at every byte: the
// meter reads the same usage whatever the pieces.
func TestMeterReadsStreamsInAnyPieces(t *testing.T) {
	anthropic := "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":40,\"output_tokens\":1}}}\r\n\r\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the \\\"usage\\\" word\"}}\n\n" +
		": a comment\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	openai := "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":12,\"total_tokens\":42,\"prompt_tokens_details\":{\"cached_tokens\":20}}}\n\n" +
		"data: [DONE]\n\n"
	responses := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":11,\"input_tokens_details\":{\"cached_tokens\":1},\"output_tokens\":4,\"total_tokens\":15}}}\n\n"
	// Writes to both caches: cache_creation says how many went to the
	// 1-hour one, which is priced apart.
	anthropicLong := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":30,\"cache_read_input_tokens\":40,\"cache_creation\":{\"ephemeral_5m_input_tokens\":12,\"ephemeral_1h_input_tokens\":18},\"output_tokens\":1}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n"
	// Newer OpenAI models charge a cache write: its tokens are part of
	// the input, like the cached ones.
	responsesWrite := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":110,\"input_tokens_details\":{\"cached_tokens\":60,\"cache_write_tokens\":40},\"output_tokens\":4,\"total_tokens\":114}}}\n\n"
	for _, tc := range []struct {
		name   string
		kind   string
		stream string
		want   Usage
	}{
		{"anthropic", "anthropic", anthropic, Usage{Tokens: wire.Tokens{InputTokens: 25, OutputTokens: 15, CacheReadTokens: 40, CacheWriteTokens: 3}, Reported: true}},
		{"anthropic, 1-hour cache writes", "anthropic", anthropicLong, Usage{Tokens: wire.Tokens{InputTokens: 25, OutputTokens: 15, CacheReadTokens: 40, CacheWriteTokens: 30, CacheWriteLongTokens: 18}, Reported: true}},
		{"openai responses, cache writes", "openai", responsesWrite, Usage{Tokens: wire.Tokens{InputTokens: 10, OutputTokens: 4, CacheReadTokens: 60, CacheWriteTokens: 40}, Reported: true}},
		{"openai chat", "openai", openai, Usage{Tokens: wire.Tokens{InputTokens: 10, OutputTokens: 12, CacheReadTokens: 20}, Reported: true}},
		{"openai responses", "openai", responses, Usage{Tokens: wire.Tokens{InputTokens: 10, OutputTokens: 4, CacheReadTokens: 1}, Reported: true}},
	} {
		for size := 1; size <= len(tc.stream); size++ {
			m := NewMeter(kindOf(t, tc.kind))
			m.Stream()
			for i := 0; i < len(tc.stream); i += size {
				m.Write([]byte(tc.stream[i:min(i+size, len(tc.stream))]))
			}
			m.End()
			if got := m.Usage(); got != tc.want || !m.Final() {
				t.Fatalf("%s in pieces of %d: %+v, want %+v", tc.name, size, got, tc.want)
			}
		}
	}
}

// The usage is found wherever the APIs put it, whatever the length of
// the line or the answer around it (OpenAI's response.completed repeats
// the instructions, the tools and every output item), and never in what
// a model or a client wrote: a tool's schema or a tool call's input that
// holds a "usage" object is not the answer's usage. Nothing of the
// answer is held.
func TestMeterFindsUsageWhateverTheLength(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	decoy := `{"usage":{"input_tokens":1,"output_tokens":1,"prompt_tokens":1,"completion_tokens":1}}`
	responses := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"instructions\":\"" + long +
		"\",\"tools\":[{\"type\":\"function\",\"parameters\":{\"type\":\"object\",\"properties\":" + decoy + "}}],\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi\"}]}]," +
		"\"usage\":{\"input_tokens\":900000,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":4},\"metadata\":{}}}\n\n"
	anthropicJSON := `{"id":"m","content":[{"type":"tool_use","input":` + decoy + `},{"type":"text","text":"` + long + `"}],"usage":{"input_tokens":7,"output_tokens":300000}}`
	chatJSON := `{"choices":[{"message":{"content":"` + long + `","tool_calls":[{"function":{"arguments":"{\"usage\":{\"prompt_tokens\":1}}"}}]}}],"usage":{"prompt_tokens":12,"completion_tokens":3}}`
	for _, tc := range []struct {
		name   string
		kind   string
		stream bool
		answer string
		want   Usage
	}{
		{"a response.completed of 3 MB", "openai", true, responses, Usage{Tokens: wire.Tokens{InputTokens: 900000, OutputTokens: 4}, Reported: true}},
		{"an Anthropic answer of 3 MB with a decoy in a tool's input", "anthropic", false, anthropicJSON, Usage{Tokens: wire.Tokens{InputTokens: 7, OutputTokens: 300000}, Reported: true}},
		{"a Chat Completion of 3 MB with a decoy in a tool call", "openai", false, chatJSON, Usage{Tokens: wire.Tokens{InputTokens: 12, OutputTokens: 3}, Reported: true}},
	} {
		m := NewMeter(kindOf(t, tc.kind))
		if tc.stream {
			m.Stream()
		}
		for i := 0; i < len(tc.answer); i += 32 << 10 {
			m.Write([]byte(tc.answer[i:min(i+32<<10, len(tc.answer))]))
		}
		m.End()
		if got := m.Usage(); got != tc.want || !m.Final() {
			t.Errorf("%s: %+v (final %v), want %+v", tc.name, got, m.Final(), tc.want)
		}
		if held := cap(m.doc.capture) + cap(m.doc.keyBuf); held > 64<<10 {
			t.Errorf("%s: the meter held %d bytes", tc.name, held)
		}
	}
}

// A stream cut before its usage (the client closed it after the text it
// wanted) is counted at least as the text that passed, marked estimated:
// never the 1 output token of Anthropic's message_start.
func TestMeterEstimatesAStreamCutBeforeItsUsage(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
	delta := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word1 \"}}\n\n"
	chat := "data: {\"choices\":[{\"delta\":{\"content\":\"word1 \"}}],\"usage\":null}\n\n"
	for _, tc := range []struct {
		name       string
		kind       string
		stream     string
		input, out uint64
	}{
		{"anthropic", "anthropic", start + strings.Repeat(delta, 20), 25, 20},
		{"openai chat", "openai", strings.Repeat(chat, 20), 100, 20},
	} {
		m := NewMeter(kindOf(t, tc.kind))
		m.Stream()
		m.Write([]byte(tc.stream))
		m.End()
		if m.Final() {
			t.Errorf("%s: a cut stream read as ended", tc.name)
		}
		u := m.Estimate(m.Usage(), 100, 0)
		if !u.Estimated || u.InputTokens != tc.input || u.OutputTokens < tc.out {
			t.Errorf("%s: estimated %+v, want input %d and at least %d output", tc.name, u, tc.input, tc.out)
		}
	}
}
