package standin

import (
	"net/http"
	"strings"
)

// geminiReq is what the stand-in reads of a GenerateContentRequest (and
// of countTokens, whose body is its contents or a whole request).
type geminiReq struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	CachedContent     string          `json:"cachedContent"`
	GenerationConfig  struct {
		ThinkingConfig *struct {
			ThinkingBudget  *int `json:"thinkingBudget"`
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	GenerateContentRequest *geminiReq `json:"generateContentRequest"`
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

// words is the request's own input tokens: the words of its contents and
// system instruction.
func (q geminiReq) words() int {
	n := 0
	for _, c := range append(q.Contents, q.system()...) {
		for _, p := range c.Parts {
			n += len(strings.Fields(p.Text))
		}
	}
	return max(n, 1)
}

func (q geminiReq) system() []geminiContent {
	if q.SystemInstruction == nil {
		return nil
	}
	return []geminiContent{*q.SystemInstruction}
}

// geminiCount is one answer's counts in Gemini's terms: the prompt holds
// the cached content's tokens (a cache named by the request, half as many
// tokens as its own words) and thinking is apart from the candidates
// (twice the answer's words, within thinkingBudget, when thinkingConfig
// asks for it).
type geminiCount struct{ words, cached, thoughts int }

func countOf(q geminiReq, answer int) geminiCount {
	c := geminiCount{words: q.words()}
	if q.CachedContent != "" {
		c.cached = max(c.words/2, 1)
	}
	if t := q.GenerationConfig.ThinkingConfig; t != nil && (t.ThinkingBudget == nil || *t.ThinkingBudget != 0) {
		c.thoughts = 2 * answer
		if t.ThinkingBudget != nil && *t.ThinkingBudget > 0 {
			c.thoughts = min(c.thoughts, *t.ThinkingBudget)
		}
	}
	return c
}

// metadata is usageMetadata after candidates tokens of the answer: every
// field a running total, as each chunk of a stream restates them.
func (c geminiCount) metadata(candidates int) map[string]any {
	prompt := c.words + c.cached
	m := map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": candidates,
		"totalTokenCount":     prompt + candidates + c.thoughts,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": prompt}}}
	if c.cached > 0 {
		m["cachedContentTokenCount"] = c.cached
	}
	if c.thoughts > 0 {
		m["thoughtsTokenCount"] = c.thoughts
	}
	return m
}

// usage is the same in flock's terms: cached tokens are not input, and
// thinking is output.
func (c geminiCount) usage(candidates int) Usage {
	return Usage{Requests: 1, Input: uint64(c.words), CacheRead: uint64(c.cached), Output: uint64(candidates + c.thoughts)}
}

// isGemini says whether r is for Gemini's API: its version's paths, a
// model's method after a colon, or its key's header or parameter on the
// path it shares with the others (GET /v1/models).
func isGemini(r *http.Request) bool {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/v1beta/models") && !strings.HasPrefix(p, "/v1/models") {
		return false
	}
	return strings.HasPrefix(p, "/v1beta/") || strings.Contains(p, ":") ||
		r.Header.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key")
}

// gemini answers the Gemini API's models: list and get, and a model's
// generateContent, streamGenerateContent and countTokens, at v1 (the
// SDK's default) and v1beta.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	model, method, _ := strings.Cut(strings.TrimPrefix(rest, "models/"), ":")
	switch {
	case r.Method == http.MethodGet && rest == "models":
		writeJSON(w, map[string]any{"models": []any{geminiModel("gemini-standin")}})
	case r.Method == http.MethodGet && method == "" && model != "" && !strings.Contains(model, "/"):
		writeJSON(w, geminiModel(model))
	case r.Method == http.MethodPost && method == "generateContent":
		s.generate(w, r, model, false)
	case r.Method == http.MethodPost && method == "streamGenerateContent" && r.URL.Query().Get("alt") == "sse":
		s.generate(w, r, model, true)
	case r.Method == http.MethodPost && method == "streamGenerateContent":
		googleErr(w, http.StatusBadRequest, "", "stand-in: a stream is served as server-sent events only (alt=sse)")
	case r.Method == http.MethodPost && method == "countTokens":
		var q geminiReq
		if !readJSON(w, r, &q, googleErr) {
			return
		}
		if q.GenerateContentRequest != nil {
			q = *q.GenerateContentRequest
		}
		c := countOf(q, 0)
		writeJSON(w, map[string]any{"totalTokens": c.words + c.cached, "cachedContentTokenCount": c.cached})
	default:
		googleErr(w, http.StatusNotFound, "", "stand-in: no such method of the Gemini API: "+r.Method+" "+r.URL.Path)
	}
}

func geminiModel(name string) map[string]any {
	return map[string]any{"name": "models/" + name, "version": "001", "displayName": "Gemini stand-in",
		"inputTokenLimit": 1048576, "outputTokenLimit": 65536, "thinking": true,
		"supportedGenerationMethods": []string{"generateContent", "countTokens"}}
}

// generate answers a GenerateContentRequest, whole or streamed: a chunk
// a word, each with usageMetadata's running totals (prompt and thinking
// from the first, candidates so far), the last with finishReason, as the
// API's models since 2.5 do; events end in CRLF, as Google's do.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	var q geminiReq
	if !readJSON(w, r, &q, googleErr) {
		return
	}
	sh := shapeOf(r)
	n := sh.words
	if n == 0 {
		n = 5
	}
	c := countOf(q, n)
	id := s.id("standin-response-")
	chunk := func(text string, candidates int, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
		if last {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": c.metadata(candidates), "modelVersion": model, "responseId": id}
	}
	if !stream {
		writeJSON(w, chunk(text(n), n, true))
		s.report(sh.tag, c.usage(n))
		return
	}
	e := newEvents(w, r, sh)
	e.eol = "\r\n"
	// Each written chunk restates the totals: the ledger has the last
	// one written, also when the stream is cut after it.
	u := Usage{Requests: 1}
	defer func() { s.report(sh.tag, u) }()
	for i, word := range strings.Fields(text(n)) {
		if i > 0 {
			word = " " + word
		}
		e.send("", chunk(word, i+1, i == n-1))
		u = c.usage(i + 1)
	}
	e.end("")
}
