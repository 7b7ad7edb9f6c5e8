package gateway

// Tier: unit.

import (
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
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
	for _, tc := range []struct {
		name   string
		kind   spec.ProviderKind
		stream string
		want   Usage
	}{
		{"anthropic", spec.KindAnthropic, anthropic, Usage{Input: 25, CacheWrite: 3, CacheRead: 40, Output: 15, Reported: true}},
		{"openai chat", spec.KindOpenAI, openai, Usage{Input: 10, CacheRead: 20, Output: 12, Reported: true}},
		{"openai responses", spec.KindOpenAI, responses, Usage{Input: 10, CacheRead: 1, Output: 4, Reported: true}},
	} {
		for size := 1; size <= len(tc.stream); size++ {
			m := &meter{kind: tc.kind}
			m.stream()
			for i := 0; i < len(tc.stream); i += size {
				m.write([]byte(tc.stream[i:min(i+size, len(tc.stream))]))
			}
			m.end()
			if got := m.usage(); got != tc.want || !m.final {
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
		kind   spec.ProviderKind
		stream bool
		answer string
		want   Usage
	}{
		{"a response.completed of 3 MB", spec.KindOpenAI, true, responses, Usage{Input: 900000, Output: 4, Reported: true}},
		{"an Anthropic answer of 3 MB with a decoy in a tool's input", spec.KindAnthropic, false, anthropicJSON, Usage{Input: 7, Output: 300000, Reported: true}},
		{"a Chat Completion of 3 MB with a decoy in a tool call", spec.KindOpenAI, false, chatJSON, Usage{Input: 12, Output: 3, Reported: true}},
	} {
		m := &meter{kind: tc.kind}
		if tc.stream {
			m.stream()
		}
		for i := 0; i < len(tc.answer); i += 32 << 10 {
			m.write([]byte(tc.answer[i:min(i+32<<10, len(tc.answer))]))
		}
		m.end()
		if got := m.usage(); got != tc.want || !m.final {
			t.Errorf("%s: %+v (final %v), want %+v", tc.name, got, m.final, tc.want)
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
		kind       spec.ProviderKind
		stream     string
		input, out uint64
	}{
		{"anthropic", spec.KindAnthropic, start + strings.Repeat(delta, 20), 25, 20},
		{"openai chat", spec.KindOpenAI, strings.Repeat(chat, 20), 100, 20},
	} {
		m := &meter{kind: tc.kind}
		m.stream()
		m.write([]byte(tc.stream))
		m.end()
		if m.final {
			t.Errorf("%s: a cut stream read as ended", tc.name)
		}
		u := m.estimate(m.usage(), 100, 0)
		if !u.Estimated || u.Input != tc.input || u.Output < tc.out {
			t.Errorf("%s: estimated %+v, want input %d and at least %d output", tc.name, u, tc.input, tc.out)
		}
	}
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
		x := &exchange{g: g, agent: 1, provider: "oai", status: 200, spends: true, metered: true, meter: newMeter(spec.KindOpenAI), inputEstimate: 40, maxOutput: 100}
		x.meter.write([]byte(`{"choices":[{"message":{"content":"` + strings.Repeat("word ", 20) + `"}}]}`))
		x.meter.end()
		x.finish(cut)
	}
	u := st.Usage(1)["oai"]
	if u.Errors[ErrorNoUsage] != 1 || u.Errors[ErrorCut] != 1 || u.EstimatedRequests != 2 || u.InputTokens != 80 || u.OutputTokens < 2*20 {
		t.Errorf("two answers without usage, one whole and one cut: %+v", u)
	}
}
