// Tier: unit. The stand-in's Gemini API: its key, its answers whole and
// streamed, and the usage it reports against the usage it wrote.
package standin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const geminiKey = "gemini-test-key"

// A prompt of twenty words: 10 cached, 10 of thinking when asked.
const twenty = `{"contents":[{"role":"user","parts":[{"text":"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"}]}]`

var (
	plain = twenty + `}`
	asked = twenty + `,"cachedContent":"cachedContents/c1","generationConfig":{"thinkingConfig":{"thinkingBudget":64}}}`
)

func do(t *testing.T, h http.Handler, method, target, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestGeminiKey(t *testing.T) {
	s := &Server{OpenAIKey: "sk-openai", GeminiKey: geminiKey}
	for _, tc := range []struct {
		name, method, target string
		header               []string
		code                 int
		status               string
	}{
		{"no key", "POST", "/v1beta/models/m:generateContent", nil, 401, "UNAUTHENTICATED"},
		{"a wrong key", "POST", "/v1beta/models/m:generateContent", []string{"X-Goog-Api-Key", "nope"}, 401, "UNAUTHENTICATED"},
		{"the key as a parameter", "POST", "/v1beta/models/m:generateContent?key=" + geminiKey, []string{"X-Goog-Api-Key", geminiKey}, 400, "INVALID_ARGUMENT"},
		{"a client's bearer beside it", "POST", "/v1/models/m:generateContent", []string{"X-Goog-Api-Key", geminiKey, "Authorization", "Bearer x"}, 400, "INVALID_ARGUMENT"},
		{"only the key as a parameter, on the path OpenAI shares", "GET", "/v1/models?key=" + geminiKey, nil, 400, "INVALID_ARGUMENT"},
		{"the key", "POST", "/v1beta/models/m:generateContent", []string{"X-Goog-Api-Key", geminiKey}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, tc.method, tc.target, plain, tc.header...)
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"error"`
			}
			json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code != tc.code || e.Error.Status != tc.status || tc.code != 200 && (e.Error.Code != tc.code || e.Error.Message == "") {
				t.Errorf("%d %s, want %d %q", w.Code, w.Body, tc.code, tc.status)
			}
		})
	}
	// OpenAI's GET /v1/models is still OpenAI's.
	if w := do(t, s, "GET", "/v1/models", "", "Authorization", "Bearer sk-openai"); w.Code != 200 || !strings.Contains(w.Body.String(), `"object":"list"`) {
		t.Errorf("OpenAI's models: %d %s", w.Code, w.Body)
	}
}

// meta is usageMetadata as the stand-in writes it.
type meta struct {
	Prompt     int `json:"promptTokenCount"`
	Candidates int `json:"candidatesTokenCount"`
	Total      int `json:"totalTokenCount"`
	Cached     int `json:"cachedContentTokenCount"`
	Thoughts   int `json:"thoughtsTokenCount"`
}

type chunk struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	Usage meta `json:"usageMetadata"`
}

func TestGeminiGenerate(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		usage      meta
		reported   Usage
	}{
		{"plain", plain, meta{Prompt: 20, Candidates: 5, Total: 25}, Usage{Requests: 1, Input: 20, Output: 5}},
		{"cached and thinking", asked, meta{Prompt: 30, Candidates: 5, Total: 45, Cached: 10, Thoughts: 10}, Usage{Requests: 1, Input: 20, CacheRead: 10, Output: 15}},
	} {
		t.Run(tc.name+", whole", func(t *testing.T) {
			s := &Server{GeminiKey: geminiKey}
			w := do(t, s, "POST", "/v1/models/gemini-x:generateContent", tc.body, "X-Goog-Api-Key", geminiKey)
			var c chunk
			if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || len(c.Candidates) != 1 {
				t.Fatalf("%d %s: %v", w.Code, w.Body, err)
			}
			if got := c.Candidates[0].Content.Parts[0].Text; got != "word0 word1 word2 word3 word4" || c.Candidates[0].FinishReason != "STOP" || c.Usage != tc.usage {
				t.Errorf("%q %s %+v, want %+v", got, c.Candidates[0].FinishReason, c.Usage, tc.usage)
			}
			if got := s.Reported(""); got != tc.reported {
				t.Errorf("reported %+v, want %+v", got, tc.reported)
			}
		})
		t.Run(tc.name+", streamed", func(t *testing.T) {
			s := &Server{GeminiKey: geminiKey}
			w := do(t, s, "POST", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", tc.body, "X-Goog-Api-Key", geminiKey)
			if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("%d %s %s", w.Code, ct, w.Body)
			}
			events := strings.Split(strings.TrimSuffix(w.Body.String(), "\r\n\r\n"), "\r\n\r\n")
			text := ""
			for i, ev := range events {
				var c chunk
				data, ok := strings.CutPrefix(ev, "data: ")
				if err := json.Unmarshal([]byte(data), &c); !ok || err != nil || len(c.Candidates) != 1 {
					t.Fatalf("event %d: %q: %v", i, ev, err)
				}
				text += c.Candidates[0].Content.Parts[0].Text
				// Running totals: all but the candidates from the first.
				want := tc.usage
				want.Candidates, want.Total = i+1, tc.usage.Total-tc.usage.Candidates+i+1
				last := i == len(events)-1
				if c.Usage != want || (c.Candidates[0].FinishReason == "STOP") != last {
					t.Errorf("event %d: %+v %q, want %+v (last: %v)", i, c.Usage, c.Candidates[0].FinishReason, want, last)
				}
			}
			if text != "word0 word1 word2 word3 word4" || len(events) != 5 {
				t.Errorf("%d events, text %q", len(events), text)
			}
			if got := s.Reported(""); got != tc.reported {
				t.Errorf("reported %+v, want %+v", got, tc.reported)
			}
		})
	}
}

// A stream cut after two chunks reported what the second said.
func TestGeminiStreamCut(t *testing.T) {
	s := &Server{GeminiKey: geminiKey}
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", strings.NewReader(asked))
	req.Header.Set("X-Goog-Api-Key", geminiKey)
	req.Header.Set("X-Standin-Cut", "2")
	req.Header.Set("X-Standin-Words", "50")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || strings.Count(string(b), "data: ") != 2 {
		t.Errorf("a cut stream: %v, %q", err, b)
	}
	// Thinking is twice the 50 words asked, within the budget of 64.
	if got, want := s.Reported(""), (Usage{Requests: 1, Input: 20, CacheRead: 10, Output: 2 + 64}); got != want {
		t.Errorf("reported %+v, want %+v", got, want)
	}
}

func TestGeminiOtherMethods(t *testing.T) {
	s := &Server{GeminiKey: geminiKey}
	for _, tc := range []struct {
		name, method, target, body string
		code                       int
		want                       any
	}{
		{"list", "GET", "/v1beta/models", "", 200, map[string]any{"models": []any{geminiModelJSON("gemini-standin")}}},
		{"get", "GET", "/v1/models/gemini-x", "", 200, geminiModelJSON("gemini-x")},
		{"count, contents", "POST", "/v1beta/models/m:countTokens", plain, 200, map[string]any{"totalTokens": 20.0, "cachedContentTokenCount": 0.0}},
		{"count, a request", "POST", "/v1/models/m:countTokens", `{"generateContentRequest":` + asked + `}`, 200, map[string]any{"totalTokens": 30.0, "cachedContentTokenCount": 10.0}},
		{"a stream not as events", "POST", "/v1beta/models/m:streamGenerateContent", plain, 400, nil},
		{"no such method", "POST", "/v1beta/models/m:embedContent", plain, 404, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, tc.method, tc.target, tc.body, "X-Goog-Api-Key", geminiKey)
			var got any
			json.Unmarshal(w.Body.Bytes(), &got)
			if w.Code != tc.code || tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%d %s, want %d %v", w.Code, w.Body, tc.code, tc.want)
			}
		})
	}
	if got := s.Reported(""); got != (Usage{}) {
		t.Errorf("nothing generated, yet reported %+v", got)
	}
}

// geminiModelJSON is geminiModel as it reads back from JSON.
func geminiModelJSON(name string) any {
	b, _ := json.Marshal(geminiModel(name))
	var v any
	json.Unmarshal(b, &v)
	return v
}
