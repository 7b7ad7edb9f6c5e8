// Package standin is the model APIs' stand-in for flock's tests and
// benchmarks: one HTTP handler that answers Anthropic's Messages API,
// OpenAI's Chat Completions and Gemini's generateContent as the real ones
// do (JSON or a stream of server-sent events, with usage: Anthropic's in
// message_start and message_delta, OpenAI's in a last chunk only when
// stream_options.include_usage asks for it, Gemini's running totals in
// every chunk), checks that each request carries the key
// the gateway must inject and none of the client's, and keeps a ledger of
// every usage it reported, so a test can compare it with what flock
// counted.
//
// It plays a scripted model: a request that offers the Write and Bash
// tools (Claude Code's loop) is answered with a Write of the file the
// prompt names, then a Bash that reads it back, then the text of what
// Bash said; anything else gets a short text. Headers the test sends
// through the gateway shape an answer: X-Standin-Words (how many words),
// X-Standin-Delay (between events), X-Standin-Cut (end the stream after
// that many events, as a provider that fails mid-answer), X-Standin-Flush
// (flush every that many events, for a stream as fast as the wire: a
// benchmark's throughput; default every event, as the APIs do).
//
// Secrets stands in for the other APIs an agent's secrets are for (git's
// smart HTTP, GitHub's API, a REST API), each wanting its real secret.
package standin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Usage is what the stand-in reported, in flock's terms (the gateway's
// Usage): input not from the cache, output, cache reads and writes.
type Usage struct {
	Requests                             uint64
	Input, Output, CacheRead, CacheWrite uint64
}

// Tokens is every token of u.
func (u Usage) Tokens() uint64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// Plus is u and v added.
func (u Usage) Plus(v Usage) Usage {
	return Usage{Requests: u.Requests + v.Requests, Input: u.Input + v.Input, Output: u.Output + v.Output,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite}
}

// Server is the stand-in. The zero value refuses every key; set them,
// or set Keyless for a model server on the host that takes none (as
// Ollama), which then refuses any request that carries a key.
type Server struct {
	AnthropicKey, OpenAIKey, GeminiKey string
	Keyless                            bool

	mu     sync.Mutex
	ledger map[string]Usage // by X-Standin-Tag
	seen   []string         // method and path of each request, in order
	n      atomic.Int64
}

// Reported is the usage reported in answers tagged tag ("" every tag).
func (s *Server) Reported(tag string) Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tag != "" {
		return s.ledger[tag]
	}
	var all Usage
	for _, u := range s.ledger {
		all = all.Plus(u)
	}
	return all
}

// Seen is every request's method and path, in order.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// report adds what one answer reported; a field that replaces an earlier
// one of the same answer (a stream's cumulative counts) is added as the
// difference by the caller.
func (s *Server) report(tag string, u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ledger == nil {
		s.ledger = map[string]Usage{}
	}
	s.ledger[tag] = s.ledger[tag].Plus(u)
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	for name := range r.Header {
		// flock's own headers (a request's task) are the gateway's to
		// read and drop; a provider never sees them.
		if strings.HasPrefix(strings.ToLower(name), "flock-") {
			http.Error(w, `{"error":{"message":"stand-in: flock's header `+name+` reached the provider","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
	}
	switch {
	case isGemini(r):
		if s.geminiAuth(w, r) {
			s.gemini(w, r)
		}
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		if s.anthropicAuth(w, r) {
			s.messages(w, r)
		}
	case r.URL.Path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		if s.anthropicAuth(w, r) {
			var req messagesReq
			if !readJSON(w, r, &req, anthropicErr) {
				return
			}
			writeJSON(w, map[string]any{"input_tokens": req.words()})
		}
	case strings.HasPrefix(r.URL.Path, "/v1/models") && r.Method == http.MethodGet:
		if r.Header.Get("X-Api-Key") != "" && s.anthropicAuth(w, r) || r.Header.Get("X-Api-Key") == "" && s.openaiAuth(w, r) {
			writeJSON(w, map[string]any{"data": []any{map[string]any{"id": "standin-1", "type": "model", "object": "model"}}, "object": "list"})
		}
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		if s.openaiAuth(w, r) {
			s.chat(w, r)
		}
	default:
		http.Error(w, `{"error":{"message":"stand-in: no such endpoint","type":"invalid_request_error"}}`, http.StatusNotFound)
	}
}

// The client's own credentials must never reach the upstream: only the
// key the gateway injects.
func (s *Server) anthropicAuth(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header.Get("Authorization") != "":
		anthropicErr(w, http.StatusBadRequest, "invalid_request_error", "stand-in: an Authorization header reached the upstream")
	case s.AnthropicKey == "" || r.Header.Get("X-Api-Key") != s.AnthropicKey:
		anthropicErr(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	default:
		return true
	}
	return false
}

func (s *Server) openaiAuth(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case s.Keyless && (r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != ""):
		openaiErr(w, http.StatusBadRequest, "invalid_request_error", "stand-in: a key reached a server that takes none")
	case s.Keyless:
		return true
	case r.Header.Get("X-Api-Key") != "":
		openaiErr(w, http.StatusBadRequest, "invalid_request_error", "stand-in: an x-api-key header reached the upstream")
	case s.OpenAIKey == "" || r.Header.Get("Authorization") != "Bearer "+s.OpenAIKey:
		openaiErr(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided")
	default:
		return true
	}
	return false
}

// geminiAuth takes the key in x-goog-api-key alone: a key= parameter
// (the API takes one too) would be in every log of the URL.
func (s *Server) geminiAuth(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Query().Has("key"):
		googleErr(w, http.StatusBadRequest, "", "stand-in: a key= query parameter reached the upstream")
	case r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "":
		googleErr(w, http.StatusBadRequest, "", "stand-in: another API's credentials reached the upstream")
	case s.GeminiKey == "" || r.Header.Get("X-Goog-Api-Key") != s.GeminiKey:
		googleErr(w, http.StatusUnauthorized, "", "API key not valid. Please pass a valid API key.")
	default:
		return true
	}
	return false
}

func anthropicErr(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func openaiErr(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// googleErr is Google's error body, its status named by the HTTP code's
// (the unused argument: readJSON's error type).
func googleErr(w http.ResponseWriter, code int, _, msg string) {
	status := map[int]string{http.StatusBadRequest: "INVALID_ARGUMENT", http.StatusUnauthorized: "UNAUTHENTICATED",
		http.StatusNotFound: "NOT_FOUND"}[code]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

func readJSON(w http.ResponseWriter, r *http.Request, v any, fail func(http.ResponseWriter, int, string, string)) bool {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_request_error", "stand-in: the body is not JSON: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// shape is what the test's headers ask of an answer.
type shape struct {
	words int           // output words; 0: the script's own
	delay time.Duration // between events
	cut   int           // end the stream after this many events (0: never)
	flush int           // flush every this many events
	tag   string
}

func shapeOf(r *http.Request) shape {
	sh := shape{tag: r.Header.Get("X-Standin-Tag")}
	sh.words, _ = strconv.Atoi(r.Header.Get("X-Standin-Words"))
	sh.delay, _ = time.ParseDuration(r.Header.Get("X-Standin-Delay"))
	sh.cut, _ = strconv.Atoi(r.Header.Get("X-Standin-Cut"))
	sh.flush, _ = strconv.Atoi(r.Header.Get("X-Standin-Flush"))
	sh.flush = max(sh.flush, 1)
	return sh
}

// text is n words of an answer.
func text(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = "word" + strconv.Itoa(i%10)
	}
	return strings.Join(words, " ")
}

// events writes a stream: each event is flushed as it is written, and the
// stream ends abruptly after sh.cut of them (counted only once written).
type events struct {
	w    http.ResponseWriter
	r    *http.Request
	sh   shape
	sent int
	eol  string // what ends a line: "\n", or Google's "\r\n"
}

func newEvents(w http.ResponseWriter, r *http.Request, sh shape) *events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &events{w: w, r: r, sh: sh, eol: "\n"}
}

// send writes one event and says whether the stream goes on; a cut
// aborts the handler (the connection or HTTP/2 stream is reset after the
// bytes already written, as a provider that fails mid-answer).
func (e *events) send(name string, data any) {
	if e.r.Context().Err() != nil {
		// The client went away: a provider stops writing, and what it
		// would have written is never reported (nor billed).
		panic(http.ErrAbortHandler)
	}
	if e.sh.cut > 0 && e.sent >= e.sh.cut {
		e.w.(http.Flusher).Flush() // what was written before the cut goes out whole
		panic(http.ErrAbortHandler)
	}
	if e.sent > 0 && e.sh.delay > 0 {
		time.Sleep(e.sh.delay)
	}
	b, ok := data.([]byte) // already JSON
	if !ok {
		b, _ = json.Marshal(data)
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s%sdata: %s%s%s", name, e.eol, b, e.eol, e.eol)
	} else {
		fmt.Fprintf(e.w, "data: %s%s%s", b, e.eol, e.eol)
	}
	if e.sent++; e.sent%e.sh.flush == 0 {
		e.w.(http.Flusher).Flush()
	}
}

// end ends the stream, with a last data line unless "" (Gemini's has
// none): abruptly if it is cut after the events already sent.
func (e *events) end(last string) {
	if e.sh.cut > 0 && e.sent >= e.sh.cut {
		e.w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	if last != "" {
		fmt.Fprintf(e.w, "data: %s%s%s", last, e.eol, e.eol)
	}
	e.w.(http.Flusher).Flush()
}

// id is a fresh identifier with prefix.
func (s *Server) id(prefix string) string { return prefix + strconv.FormatInt(s.n.Add(1), 10) }

var workdirRe = regexp.MustCompile(`(?i)working directory:\s*(/\S+)`)
var writeRe = regexp.MustCompile(`(?i)write\s+(\S+?):\s*(.+)`)
var runRe = regexp.MustCompile(`(?s)run: <<CMD\n(.*?)\nCMD(?:\n|$)`)
