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
			s := &sse{m: &meter{kind: tc.kind}}
			for i := 0; i < len(tc.stream); i += size {
				s.write([]byte(tc.stream[i:min(i+size, len(tc.stream))]))
			}
			if got := s.m.usage(); got != tc.want {
				t.Fatalf("%s in pieces of %d: %+v, want %+v", tc.name, size, got, tc.want)
			}
		}
	}
}

// An answer too long to hold whole is read from its tail, where both
// APIs write usage; a line too long to hold is passed on unread.
func TestMeterBounds(t *testing.T) {
	x := &exchange{json: true, meter: meter{kind: spec.KindOpenAI}}
	x.keepJSON([]byte(`{"data":[`))
	for range maxJSON / 900 {
		x.keepJSON([]byte(strings.Repeat(`{"embedding":[0.1,0.2]},`, 40)))
	}
	x.keepJSON([]byte(`{}],"usage":{"prompt_tokens":77,"total_tokens":77}}`))
	x.endJSON()
	if len(x.head) != 0 || len(x.tail) > 2*tailSize {
		t.Errorf("held %d + %d bytes", len(x.head), len(x.tail))
	}
	if u := x.meter.usage(); u.Input != 77 {
		t.Errorf("usage from the tail: %+v", u)
	}
	s := &sse{m: &meter{kind: spec.KindAnthropic}}
	s.write([]byte("data: {\"usage\":{\"output_tokens\":" + strings.Repeat("9", maxLine) + "}}\n"))
	s.write([]byte("data: {\"usage\":{\"output_tokens\":5}}\n"))
	if u := s.m.usage(); u.Output != 5 || len(s.line) != 0 {
		t.Errorf("after a line too long: %+v (holding %d)", u, len(s.line))
	}
}
