package modelapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// What every kind's judges share. An endpoint the gateway carries is one
// whose usage it can read from the answer (or that uses no tokens):
// batches, files, assistants and realtime sessions are not, as their
// tokens are spent out of sight of the request, so a limit could not
// hold.

// PathProblem says what is wrong with a path the gateway would forward:
// a "." or ".." segment (which a server or a proxy on the way may
// resolve to another endpoint than the one judged) or an empty one.
func PathProblem(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Sprintf("the path %s has a %q segment; send the endpoint's own path", Quoted(path), seg)
		case seg == "" && i < len(segs)-1:
			return fmt.Sprintf("the path %s has an empty segment; send the endpoint's own path", Quoted(path))
		}
	}
	return ""
}

// Maxima of output the gateway reserves for, and sets, when a request
// names none and its grant counts tokens: a ceiling needs a maximum.
const (
	// DefaultMaxOutput is set as max_completion_tokens (Chat
	// Completions), max_output_tokens (Responses) or
	// generationConfig.maxOutputTokens (Gemini).
	DefaultMaxOutput = 32768
	// completionsDefault is the legacy Completions API's own default
	// max_tokens.
	completionsDefault = 16
	// maxChoices bounds n and best_of (OpenAI's own bound).
	maxChoices = 128
)

// anyObject takes any JSON object; its usage is input only.
func anyObject(*Body, http.Header, Allowed) (Plan, error) { return Plan{}, nil }

// choices is how many answers a request asks for: the largest of keys,
// at least 1.
func choices(b *Body, keys ...string) (uint64, error) {
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

// Quoted is what the client sent, short and quoted (printable, escaped).
func Quoted(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return strconv.Quote(s)
}
