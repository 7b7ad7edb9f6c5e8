package standin

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// chatReq is what the stand-in reads of a Chat Completions request.
type chatReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chat answers a Chat Completions request, whole or streamed; a stream
// reports usage only if include_usage asks, in one last chunk with no
// choices, as OpenAI's does.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var q chatReq
	if !readJSON(w, r, &q, openaiErr) {
		return
	}
	sh := shapeOf(r)
	prompt := 0
	for _, m := range q.Messages {
		prompt += len(strings.Fields(flat(m.Content)))
	}
	prompt = max(prompt, 1)
	n := sh.words
	if n == 0 {
		n = 5
	}
	answer := text(n)
	cached := prompt / 3
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}}
	reported := Usage{Requests: 1, Input: uint64(prompt - cached), CacheRead: uint64(cached), Output: uint64(n)}
	id, created := s.id("chatcmpl-standin-"), time.Now().Unix()
	if !q.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": q.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
			"usage":   usage})
		s.report(sh.tag, reported)
		return
	}
	withUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	e := newEvents(w, r, sh)
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if withUsage {
			c["usage"] = nil
		}
		return c
	}
	// Only the last chunk reports; a stream cut before it reported
	// nothing but the request.
	s.report(sh.tag, Usage{Requests: 1})
	e.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, word := range strings.Fields(answer) {
		if i > 0 {
			word = " " + word
		}
		e.send("", chunk(map[string]any{"content": word}, nil))
	}
	e.send("", chunk(map[string]any{}, "stop"))
	if withUsage {
		e.send("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model, "choices": []any{}, "usage": usage})
		reported.Requests = 0
		s.report(sh.tag, reported)
	}
	e.end("[DONE]")
}
