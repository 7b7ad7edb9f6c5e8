package gateway

import (
	"fmt"
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
	// judge reads a body (nil: the endpoint takes none) with the
	// request's headers, under the agent's grant, and says what the
	// request may spend and how it is sent; an error is a 400 naming the
	// problem (badBody), or a 403 for what the grant does not allow
	// (refusal: a provider-side tool, a beta).
	judge func(b *reqBody, h http.Header, g spec.Grant) (plan, error)
	// spends: its answers report a usage (an answer without one is
	// counted as an error of its own, and estimated).
	spends bool
}

// plan is what the gateway makes of a request's body: the most output it
// may ask for (its maximum, times its choices), and the edits it sends
// with.
type plan struct {
	maxOutput uint64
	edits     []edit
}

var endpoints = map[spec.ProviderKind][]endpoint{
	spec.KindAnthropic: {
		{method: http.MethodPost, path: "/v1/messages", judge: anthropicMessages, spends: true},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", judge: anyObject},
		{method: http.MethodGet, path: "/v1/models"},
		{method: http.MethodGet, path: "/v1/models/"},
	},
	spec.KindOpenAI: {
		{method: http.MethodPost, path: "/chat/completions", judge: openaiChat, spends: true},
		{method: http.MethodPost, path: "/completions", judge: openaiCompletions, spends: true},
		{method: http.MethodPost, path: "/embeddings", judge: anyObject, spends: true},
		{method: http.MethodPost, path: "/responses", judge: openaiResponses, spends: true},
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

// pathProblem says what is wrong with a path the gateway would forward:
// a "." or ".." segment (which a server or a proxy on the way may
// resolve to another endpoint than the one judged) or an empty one.
func pathProblem(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Sprintf("the path %s has a %q segment; send the endpoint's own path", quoted(path), seg)
		case seg == "" && i < len(segs)-1:
			return fmt.Sprintf("the path %s has an empty segment; send the endpoint's own path", quoted(path))
		}
	}
	return ""
}

// Maxima of output the gateway reserves for, and sets, when a request
// names none and its grant counts tokens: a ceiling needs a maximum.
const (
	// DefaultMaxOutput is set as max_completion_tokens (Chat
	// Completions) or max_output_tokens (Responses).
	DefaultMaxOutput = 32768
	// completionsDefault is the legacy Completions API's own default
	// max_tokens.
	completionsDefault = 16
	// maxChoices bounds n and best_of (OpenAI's own bound).
	maxChoices = 128
)

// anyObject takes any JSON object; its usage is input only.
func anyObject(*reqBody, http.Header, spec.Grant) (plan, error) { return plan{}, nil }

// limited says whether g counts tokens: a request to it needs a maximum.
func limited(g spec.Grant) bool { return g.TokensPerDay > 0 || g.TokensPerMonth > 0 }

// anthropicMessages: a stream is a boolean, max_tokens (which the API
// requires) is the most the answer may write, and the provider-side
// tools and betas are the grant's (anthropicTools).
func anthropicMessages(b *reqBody, h http.Header, g spec.Grant) (plan, error) {
	if _, err := b.boolOf("stream"); err != nil {
		return plan{}, err
	}
	max, _, err := b.countOf("max_tokens", spec.MaxTokens)
	if err != nil {
		return plan{}, err
	}
	return plan{maxOutput: max}, anthropicTools(b, h, g)
}

// openaiChat: a Chat Completion's maximum, its usage when streamed, and
// no provider-side tool its grant does not allow (chatTools).
func openaiChat(b *reqBody, _ http.Header, g spec.Grant) (plan, error) {
	p, err := openaiMax(b, limited(g), "max_completion_tokens", "max_completion_tokens", "max_tokens")
	if err != nil {
		return plan{}, err
	}
	if err := includeUsage(b, &p); err != nil {
		return plan{}, err
	}
	return p, chatTools(b, g)
}

// openaiCompletions: the legacy API writes max_tokens (16 unless set) for
// each of best_of or n choices.
func openaiCompletions(b *reqBody, _ http.Header, _ spec.Grant) (plan, error) {
	max, set, err := b.countOf("max_tokens", spec.MaxTokens)
	if err != nil {
		return plan{}, err
	}
	if !set {
		max = completionsDefault
	}
	n, err := choices(b, "n", "best_of")
	if err != nil {
		return plan{}, err
	}
	p := plan{maxOutput: max * n}
	return p, includeUsage(b, &p)
}

// includeUsage makes a streamed Chat Completion (or Completion) report
// its usage: OpenAI streams carry usage only when the request sets
// stream_options.include_usage, and a client that leaves it out (or sets
// it false) would spend tokens no limit sees. The gateway sets it; the
// client then receives one more chunk at the end, with the usage and no
// choices, as any client that asked for it does.
func includeUsage(b *reqBody, p *plan) error {
	stream, err := b.boolOf("stream")
	if err != nil || !stream {
		return err
	}
	opts := []byte(`{"include_usage":true`)
	if m, ok := b.get("stream_options"); ok {
		ms, err := b.object(m, "stream_options")
		if err != nil {
			return err
		}
		for _, o := range ms {
			if o.key == "include_usage" {
				if string(b.value(o)) == "true" && len(ms) > 0 {
					return nil // as asked
				}
				continue
			}
			opts = append(append(opts, ','), b.raw[o.kstart:o.end]...)
		}
	}
	p.edits = append(p.edits, edit{key: "stream_options", value: append(opts, '}')})
	return nil
}

// openaiResponses: run in the foreground only (a background response's
// usage would come with a later retrieval the gateway does not carry),
// with no provider-side tool its grant does not allow (responsesTools).
func openaiResponses(b *reqBody, _ http.Header, g spec.Grant) (plan, error) {
	if _, err := b.boolOf("stream"); err != nil {
		return plan{}, err
	}
	bg, err := b.boolOf("background")
	if err != nil {
		return plan{}, err
	}
	if bg {
		return plan{}, badBody("a Responses request with background: true spends tokens the gateway cannot meter; run it in the foreground (stream: true for long ones)")
	}
	p, err := openaiMax(b, limited(g), "max_output_tokens", "max_output_tokens")
	if err != nil {
		return plan{}, err
	}
	return p, responsesTools(b, g)
}

// openaiMax reads the maximum of output a request names (the largest of
// keys, times its choices); when it names none and the grant counts
// tokens, it sets set to DefaultMaxOutput.
func openaiMax(b *reqBody, limited bool, set string, keys ...string) (plan, error) {
	var most uint64
	named := false
	for _, k := range keys {
		n, ok, err := b.countOf(k, spec.MaxTokens)
		if err != nil {
			return plan{}, err
		}
		if ok {
			most, named = max(most, n), true
		}
	}
	n, err := choices(b, "n")
	if err != nil {
		return plan{}, err
	}
	p := plan{maxOutput: most * n}
	if !named {
		p.maxOutput = DefaultMaxOutput * n
		if limited {
			p.edits = append(p.edits, edit{key: set, value: []byte(strconv.Itoa(DefaultMaxOutput))})
		}
	}
	return p, nil
}

// choices is how many answers a request asks for: the largest of keys,
// at least 1.
func choices(b *reqBody, keys ...string) (uint64, error) {
	n := uint64(1)
	for _, k := range keys {
		v, _, err := b.countOf(k, maxChoices)
		if err != nil {
			return 0, err
		}
		n = max(n, v)
	}
	return n, nil
}
