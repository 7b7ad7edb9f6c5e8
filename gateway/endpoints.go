package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/flockrun/flock/spec"
)

// endpoint is a path of a provider's API that the gateway carries: one
// whose usage it can read from the answer (or that uses no tokens).
// Batches, files, assistants and realtime sessions are not: their tokens
// are spent out of sight of the request, so a limit could not hold.
type endpoint struct {
	method string
	path   string // relative to the provider's base URL; a trailing "/" takes one more segment
	// rewrite checks or changes the request before it goes (nil: none);
	// a status other than 0 refuses it with line.
	rewrite func(r *http.Request) (status int, line string)
}

var endpoints = map[spec.ProviderKind][]endpoint{
	spec.KindAnthropic: {
		{method: http.MethodPost, path: "/v1/messages"},
		{method: http.MethodPost, path: "/v1/messages/count_tokens"},
		{method: http.MethodGet, path: "/v1/models"},
		{method: http.MethodGet, path: "/v1/models/"},
	},
	spec.KindOpenAI: {
		{method: http.MethodPost, path: "/chat/completions", rewrite: includeUsage},
		{method: http.MethodPost, path: "/completions", rewrite: includeUsage},
		{method: http.MethodPost, path: "/embeddings"},
		{method: http.MethodPost, path: "/responses", rewrite: inForeground},
		{method: http.MethodGet, path: "/models"},
		{method: http.MethodGet, path: "/models/"},
	},
}

func endpointOf(kind spec.ProviderKind, method, path string) (endpoint, bool) {
	for _, e := range endpoints[kind] {
		if e.method != method {
			continue
		}
		if rest, ok := strings.CutPrefix(path, e.path); ok && (rest == "" && !strings.HasSuffix(e.path, "/") || strings.HasSuffix(e.path, "/") && rest != "" && !strings.Contains(rest, "/")) {
			return e, true
		}
	}
	return endpoint{}, false
}

// endpointList names kind's endpoints for an error.
func endpointList(kind spec.ProviderKind) string {
	var out []string
	for _, e := range endpoints[kind] {
		p := e.path
		if strings.HasSuffix(p, "/") {
			p += "{id}"
		}
		out = append(out, e.method+" "+p)
	}
	return strings.Join(out, ", ")
}

// readBody reads a request's body (bounded by MaxBytesReader) and puts
// it back for the proxy to send.
func readBody(r *http.Request) ([]byte, int, string) {
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, http.StatusRequestEntityTooLarge, "the request body is more than the gateway carries (" + strconv.Itoa(MaxRequestBody) + " bytes); send less"
	}
	if err != nil {
		return nil, http.StatusBadRequest, "the request body could not be read: " + err.Error()
	}
	return b, 0, ""
}

func setBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	r.Header.Del("Transfer-Encoding")
}

// includeUsage makes a streamed Chat Completion (or Completion) report its
// usage: OpenAI streams carry usage only when the request sets
// stream_options.include_usage, and a client that leaves it out (or sets
// it false) would spend tokens no limit sees. The gateway sets it; the
// client then receives one more chunk at the end, with the usage and no
// choices, as any client that asked for it does.
func includeUsage(r *http.Request) (int, string) {
	b, status, line := readBody(r)
	if status != 0 {
		return status, line
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(b, &req) != nil {
		setBody(r, b) // not JSON: the provider says so in its own words
		return 0, ""
	}
	if stream, _ := strconv.ParseBool(string(req["stream"])); !stream {
		setBody(r, b)
		return 0, ""
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := req["stream_options"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &opts) != nil {
			return http.StatusBadRequest, "stream_options is not an object"
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	req["stream_options"], _ = json.Marshal(opts)
	out, err := json.Marshal(req)
	if err != nil {
		return http.StatusBadRequest, "the request body could not be encoded again: " + err.Error()
	}
	setBody(r, out)
	return 0, ""
}

// inForeground refuses a Responses request run in the background: its
// usage would come with a later retrieval the gateway does not carry.
func inForeground(r *http.Request) (int, string) {
	b, status, line := readBody(r)
	if status != 0 {
		return status, line
	}
	setBody(r, b)
	var req struct {
		Background bool `json:"background"`
	}
	if json.Unmarshal(b, &req) == nil && req.Background {
		return http.StatusBadRequest, "a Responses request with background: true spends tokens the gateway cannot meter; run it in the foreground (stream: true for long ones)"
	}
	return 0, ""
}
