package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/flockrun/flock/spec"
)

// apiError writes an error the way provider kind's API writes its own, so
// an SDK raises its usual exception with the message flock gives (both
// SDKs read error.message). Kind "" (the provider is not known) writes a
// body both read.
func apiError(w http.ResponseWriter, kind spec.ProviderKind, status int, msg string, retryAfter time.Duration) {
	var body any
	switch kind {
	case spec.KindAnthropic:
		body = map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg}}
	case spec.KindOpenAI:
		body = map[string]any{"error": map[string]any{"message": msg, "type": openaiType(status), "param": nil, "code": openaiCode(status)}}
	default:
		body = map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg, "code": openaiCode(status)}}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	// The SDKs retry 429 and 5xx by themselves; they wait what
	// retry-after says.
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	h.Set("X-Flock-Proxy", "refused")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// anthropicType is the error type Anthropic's API gives a status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	return "api_error"
}

// openaiType is the error type OpenAI's API gives a status.
func openaiType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func openaiCode(status int) string {
	switch status {
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusBadGateway:
		return "upstream_unreachable"
	}
	return "invalid_request"
}
