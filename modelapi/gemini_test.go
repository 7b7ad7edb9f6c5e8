package modelapi

// Tier: unit. Gemini's answers and requests as the API writes them: a
// stream's running usage is final only with its finishReason, a stream
// without SSE is an array of answers, and a request's maximum is read
// (or set) wherever the API reads it.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flockrun/flock/wire"
)

func TestMeterReadsGeminiRunningTotals(t *testing.T) {
	chunk := func(text, finish string, out int) string {
		f := ""
		if finish != "" {
			f = `,"finishReason":"` + finish + `"`
		}
		return `{"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"}` + f + `,"index":0}],"usageMetadata":{"promptTokenCount":30,"cachedContentTokenCount":10,"candidatesTokenCount":` + string(rune('0'+out)) + `,"thoughtsTokenCount":6,"totalTokenCount":40}}`
	}
	sse := func(docs ...string) string { return "data: " + strings.Join(docs, "\r\n\r\ndata: ") + "\r\n\r\n" }
	whole := wire.Tokens{InputTokens: 20, CacheReadTokens: 10, OutputTokens: 3 + 6}
	for _, tc := range []struct {
		name   string
		stream bool
		answer string
		final  bool
	}{
		{"a stream", true, sse(chunk("word0 ", "", 1), chunk("word1 ", "", 2), chunk("word2", "STOP", 3)), true},
		{"a stream cut before its last event", true, sse(chunk("word0 ", "", 1), chunk("word1 ", "", 2)), false},
		{"a stream without SSE: an array", false, "[" + chunk("word0 ", "", 1) + ",\r\n" + chunk("word2", "MAX_TOKENS", 3) + "]", true},
		{"a whole answer", false, chunk("word0 word1 word2", "STOP", 3), true},
		{"a prompt blocked", false, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":30,"totalTokenCount":30}}`, true},
	} {
		for size := 1; size <= len(tc.answer); size += 7 {
			m := NewMeter(kindOf(t, "gemini"))
			if tc.stream {
				m.Stream()
			}
			for i := 0; i < len(tc.answer); i += size {
				m.Write([]byte(tc.answer[i:min(i+size, len(tc.answer))]))
			}
			m.End()
			if m.Final() != tc.final {
				t.Fatalf("%s in pieces of %d: final %v, want %v", tc.name, size, m.Final(), tc.final)
			}
			if got := m.Usage().Tokens; tc.final && tc.name != "a prompt blocked" && got != whole {
				t.Fatalf("%s in pieces of %d: %+v, want %+v", tc.name, size, got, whole)
			}
		}
	}
}

func TestJudgeGeminiRequests(t *testing.T) {
	const path = "/v1beta/models/gemini-x:generateContent"
	judge := func(body string, g Allowed) (Plan, error) {
		t.Helper()
		ep, ok := kindOf(t, "gemini").Endpoint(http.MethodPost, path)
		if !ok {
			t.Fatal("no generateContent")
		}
		b, err := ParseBody([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ep.Read(b, nil, g)
		if err == nil && len(p.Edits) > 0 {
			pieces, _ := b.With(p.Edits)
			var sb strings.Builder
			for _, piece := range pieces {
				sb.Write(piece)
			}
			p.Edits[0].Value = []byte(sb.String()) // the whole body sent, for the table
		}
		return p, err
	}
	limited := Allowed{Provider: "gem", Limited: true}
	for _, tc := range []struct {
		name, body string
		g          Allowed
		most       uint64
		sent       string // the body sent, if edited
	}{
		{"a maximum", `{"generationConfig":{"maxOutputTokens":100}}`, limited, 100, ""},
		{"a maximum in snake_case", `{"generation_config":{"max_output_tokens":100,"candidate_count":3}}`, limited, 300, ""},
		{"none, unlimited", `{"contents":[]}`, Allowed{}, DefaultMaxOutput, ""},
		{"none, limited", `{"contents":[]}`, limited, DefaultMaxOutput, `{"generationConfig":{"maxOutputTokens":32768},"contents":[]}`},
		{"none in a configuration", `{"generation_config":{"temperature":0.5,"max_output_tokens":null}}`, limited, DefaultMaxOutput, `{"generation_config":{"maxOutputTokens":32768,"temperature":0.5}}`},
		{"function declarations", `{"tools":[{"functionDeclarations":[{"name":"googleSearch"}]}],"generationConfig":{"maxOutputTokens":1}}`, limited, 1, ""},
	} {
		p, err := judge(tc.body, tc.g)
		if err != nil || p.MaxOutput != tc.most {
			t.Errorf("%s: %+v, %v; want a maximum of %d", tc.name, p, err, tc.most)
			continue
		}
		if sent := ""; len(p.Edits) > 0 {
			sent = string(p.Edits[0].Value)
			if sent != tc.sent {
				t.Errorf("%s: sent %s, want %s", tc.name, sent, tc.sent)
			}
		} else if tc.sent != "" {
			t.Errorf("%s: sent as it came, want %s", tc.name, tc.sent)
		}
	}
	for _, tc := range []struct{ name, body, want string }{
		{"search", `{"tools":[{"googleSearch":{}}]}`, "server_tools: [file_search, web_search]"},
		{"search, snake_case", `{"tools":[{"google_search_retrieval":{}}]}`, "server_tools: [file_search, web_search]"},
		{"url context", `{"tools":[{"urlContext":{}}]}`, "server_tools: [file_search, web_fetch]"},
		{"code execution", `{"tools":[{"code_execution":{}}]}`, "server_tools: [file_search, code_execution]"},
		{"a tool flock does not know", `{"tools":[{"googleMaps":{}}]}`, `a tool of type "googleMaps"`},
	} {
		_, err := judge(tc.body, Allowed{Provider: "gem", Tools: []ServerTool{ToolFileSearch}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
}
