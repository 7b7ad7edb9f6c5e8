package gateway

// Tier: unit. Gemini, the third kind, through the gateway in front of the
// stand-in: its key injected in x-goog-api-key and none of the client's,
// whole and streamed answers counted as the stand-in reported them
// (thinking and cached tokens included), and what would send a key or
// hide the usage refused before anything is sent.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
)

func TestGatewayCarriesGemini(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"gem": {Provider: "gem", TokensPerDay: 1e6}}, nil))
	const ask = `{"contents":[{"role":"user","parts":[{"text":"say five words"}]}],"cachedContent":"cachedContents/standin","generationConfig":{"maxOutputTokens":100,"thinkingConfig":{"thinkingBudget":64}}}`
	for _, path := range []string{"/gem/v1beta/models/gemini-x:generateContent", "/gem/v1/models/gemini-x:streamGenerateContent?alt=sse"} {
		status, _, body := r.call(uidA, http.MethodPost, path, ask, "X-Goog-Api-Key", "placeholder", "X-Standin-Tag", "g")
		if status != 200 || !strings.Contains(body, "usageMetadata") {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
	for _, path := range []string{"/gem/v1beta/models", "/gem/v1/models/gemini-x"} {
		if status, _, body := r.call(uidA, http.MethodGet, path, ""); status != 200 {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	want := reported(r.up.Reported("g"))
	if want.OutputTokens == 0 || want.CacheReadTokens == 0 {
		t.Fatalf("the stand-in reported %+v: want output with thinking, and cache reads", want)
	}
	eventually(t, func() error {
		if got := r.usageOf(idA, "gem"); got != want {
			return errorf("counted %+v, the stand-in reported %+v", got, want)
		}
		return nil
	})
	for _, tc := range []struct{ name, path, body, want string }{
		{"a key in the query", "/gem/v1beta/models/gemini-x:generateContent?key=AIza-mine", ask, `the query parameter "key" is not one the gateway forwards`},
		{"a field mask", "/gem/v1beta/models/gemini-x:generateContent?fields=candidates", ask, `the query parameter "fields"`},
		{"an answer as protobuf", "/gem/v1beta/models/gemini-x:streamGenerateContent?alt=proto", ask, `alt="proto" asks for an answer the gateway cannot meter`},
		{"both spellings", "/gem/v1beta/models/gemini-x:generateContent", `{"generationConfig":{"maxOutputTokens":1},"generation_config":{"max_output_tokens":100000}}`, "as camelCase and snake_case"},
		{"another spelling", "/gem/v1beta/models/gemini-x:generateContent", `{"GenerationConfig":{"maxOutputTokens":1}}`, `write it generationConfig`},
		{"a maximum as a string", "/gem/v1beta/models/gemini-x:generateContent", `{"generationConfig":{"maxOutputTokens":"1"}}`, `maxOutputTokens is "1"`},
	} {
		status, h, body := r.call(uidA, http.MethodPost, tc.path, tc.body)
		if status != 400 || h.Get("X-Flock-Proxy") != "refused" || !strings.Contains(errorMessage(t, body), tc.want) || !strings.Contains(body, `"status":"INVALID_ARGUMENT"`) {
			t.Errorf("%s: %d %s; want a 400 in Google's shape saying %q", tc.name, status, body, tc.want)
		}
	}
	status, _, body := r.call(uidA, http.MethodPost, "/gem/v1beta/models/gemini-x:generateContent", `{"contents":[],"tools":[{"google_search":{}}]}`)
	if status != 403 || !strings.Contains(body, "allow it with server_tools: [web_search] in agents[id=1].models.gem") {
		t.Errorf("google_search without the grant: %d %s", status, body)
	}
	for _, seen := range r.up.Seen() {
		if strings.Contains(seen, "key=") || strings.Contains(seen, "placeholder") {
			t.Errorf("the upstream saw %q", seen)
		}
	}
}
