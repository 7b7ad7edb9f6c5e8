package modelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flockrun/flock/wire"
)

// Google's Gemini API (generativelanguage.googleapis.com), v1 and v1beta:
// its key in x-goog-api-key, usage in each answer's usageMetadata (a
// stream reports its totals so far in every event; the one that finishes
// the candidate is the last), provider-side tools as members of tools[].
// The API reads a body's fields in lowerCamelCase and in snake_case
// alike, so the judge reads both, and refuses a body that gives both.
func init() {
	var eps []Endpoint
	for _, v := range []string{"/v1beta", "/v1"} {
		eps = append(eps,
			Endpoint{Method: http.MethodPost, Path: v + "/models/{model}:generateContent", Judge: geminiGenerate, Spends: true},
			Endpoint{Method: http.MethodPost, Path: v + "/models/{model}:streamGenerateContent", Judge: geminiGenerate, Spends: true},
			Endpoint{Method: http.MethodPost, Path: v + "/models/{model}:countTokens", Judge: anyObject},
			Endpoint{Method: http.MethodGet, Path: v + "/models"},
			Endpoint{Method: http.MethodGet, Path: v + "/models/{model}"},
		)
	}
	Register(Kind{
		Name:       "gemini",
		About:      "Google's Gemini API",
		ExampleURL: "https://generativelanguage.googleapis.com",
		BaseURLEnv: "GOOGLE_GEMINI_BASE_URL",
		KeyEnv:     "GEMINI_API_KEY",
		Auth:       func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		// Its own key header, and the field mask that would leave the
		// usage out of the answer.
		Dropped:   []string{"X-Goog-Api-Key", "X-Goog-Fieldmask"},
		Query:     geminiQuery,
		Endpoints: eps,
		// models/{model}:method
		ModelIn: func(path string) string {
			_, m, _ := strings.Cut(path, "/models/")
			m, _, _ = strings.Cut(m, ":")
			return m
		},
		Usage: UsageFormat{
			Paths:     []UsagePath{{Keys: []string{"usageMetadata"}}},
			FinalKeys: [][]string{{"candidates", "finishReason"}, {"promptFeedback", "blockReason"}},
			New:       func() UsageReader { return &geminiUsage{} },
		},
		Error: func(status int, msg string) any {
			return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": googleStatus(status)}}
		},
		ServerTools: geminiOffers,
		Probe: Probe{List: "/v1beta/models", Send: "/v1beta/models/flock-audit-probe:generateContent",
			Ask:  `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":1}}`,
			Tool: `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":1},"tools":[{"googleSearch":{}}]}`},
	})
}

var geminiOffers = []ServerTool{ToolWebSearch, ToolWebFetch, ToolCodeExecution, ToolFileSearch}

// geminiTools are the members of a Gemini tools[] entry, folded
// (geminiFold), by what each is: a server tool, or the client's own
// (""). Any other member is a tool flock does not know.
var geminiTools = map[string]ServerTool{
	"functiondeclarations":  "",
	"computeruse":           "", // the client runs the actions
	"googlesearch":          ToolWebSearch,
	"googlesearchretrieval": ToolWebSearch,
	"urlcontext":            ToolWebFetch,
	"codeexecution":         ToolCodeExecution,
	"filesearch":            ToolFileSearch,
}

// geminiQuery refuses what Google's APIs read from a query beside the
// request: a key (key=, access_token=), a field mask that would leave
// the usage out of the answer (fields=), an encoding the meter cannot
// read (alt= other than json or sse, callback=). A list's paging passes.
func geminiQuery(q url.Values, e Endpoint) error {
	for name, vs := range q {
		switch name {
		case "alt":
			for _, v := range vs {
				if v != "json" && v != "sse" {
					return BadBody(fmt.Sprintf("the query's alt=%s asks for an answer the gateway cannot meter; use alt=sse to stream, or leave alt out", Quoted(v)))
				}
			}
		case "pageSize", "pageToken":
		default:
			return BadBody(fmt.Sprintf("the query parameter %s is not one the gateway forwards (only alt=sse, and pageSize and pageToken for a list); the key is flock-proxy's, and the answer must carry its usage", Quoted(name)))
		}
	}
	return nil
}

// geminiGenerate: the most the answer may write is
// generationConfig.maxOutputTokens (thinking included) times its
// candidateCount; with none named and a grant that counts tokens, the
// gateway sets DefaultMaxOutput. Its tools are the grant's.
func geminiGenerate(b *Body, _ http.Header, g Allowed) (Plan, error) {
	gc, ok, err := geminiMember(b, b.members, "generationConfig", "")
	if err != nil {
		return Plan{}, err
	}
	var conf []member
	if ok {
		if conf, err = b.object(gc, "generationConfig"); err != nil {
			return Plan{}, err
		}
	}
	mo, named, err := geminiMember(b, conf, "maxOutputTokens", "generationConfig.")
	if err != nil {
		return Plan{}, err
	}
	most, named, err := b.count(mo, named, "generationConfig.maxOutputTokens", MaxTokens)
	if err != nil {
		return Plan{}, err
	}
	cc, set, err := geminiMember(b, conf, "candidateCount", "generationConfig.")
	if err != nil {
		return Plan{}, err
	}
	n, set, err := b.count(cc, set, "generationConfig.candidateCount", maxChoices)
	if err != nil {
		return Plan{}, err
	}
	if !set || n == 0 {
		n = 1
	}
	p := Plan{MaxOutput: most * n}
	if !named {
		p.MaxOutput = DefaultMaxOutput * n
		if g.Limited {
			// The configuration again, its maximum first and every
			// other member as written (a null maximum left out).
			v := []byte(`{"maxOutputTokens":` + strconv.Itoa(DefaultMaxOutput))
			for _, m := range conf {
				if geminiFold(m.key) != "maxoutputtokens" {
					v = append(append(v, ','), b.raw[m.kstart:m.end]...)
				}
			}
			key := "generationConfig"
			if ok {
				key = b.keyOf(gc)
			}
			p.Edits = append(p.Edits, Edit{Key: key, Value: append(v, '}')})
		}
	}
	return p, geminiCheckTools(b, g)
}

// geminiCheckTools judges each tools[] entry's members against grant g.
func geminiCheckTools(b *Body, g Allowed) error {
	m, ok, err := geminiMember(b, b.members, "tools", "")
	if err != nil || !ok {
		return err
	}
	return b.eachObject(m, "tools", func(i int, name string, ms []member) error {
		for _, mem := range ms {
			key := b.keyOf(mem)
			t, known := geminiTools[geminiFold(mem.key)]
			switch {
			case !known:
				return unknownTool(g, i, key, toolsUse(geminiOffers, "functionDeclarations and computerUse"))
			case t != "":
				if err := checkTool(g, t, fmt.Sprintf("%s.%s", name, key)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// geminiMember is the member of ms the API reads as camel (or its
// snake_case); both given is refused, as a server may read either.
func geminiMember(b *Body, ms []member, camel, prefix string) (member, bool, error) {
	var found member
	n := 0
	for _, m := range ms {
		if geminiFold(m.key) == strings.ToLower(camel) {
			found, n = m, n+1
		}
	}
	switch {
	case n > 1:
		return member{}, false, BadBody(fmt.Sprintf("the key %s%s is in the request body twice (as camelCase and snake_case, which the API reads alike); send it once", prefix, camel))
	case n == 1 && b.keyOf(found) != camel && b.keyOf(found) != snake(camel):
		// Read here, but perhaps not by the API: a limit would be
		// judged by what the provider ignores.
		return member{}, false, BadBody(fmt.Sprintf("the key %s%s is written %s; write it %s (or %s), as the API names it", prefix, camel, Quoted(b.keyOf(found)), camel, snake(camel)))
	}
	return found, n == 1, nil
}

// snake is camel in snake_case.
func snake(camel string) string {
	var sb strings.Builder
	for _, r := range camel {
		if 'A' <= r && r <= 'Z' {
			sb.WriteByte('_')
			r += 'a' - 'A'
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// geminiFold is a folded key (foldKey's) without its underscores: the
// one name of a field the API reads in either case.
func geminiFold(folded string) string { return strings.ReplaceAll(folded, "_", "") }

// geminiUsage reads usageMetadata: input is the prompt (which includes
// what was read from the cache) less the cached part, plus the tools'
// prompts; output is the candidates' tokens and the thinking.
type geminiUsage struct{ prompt, cached, toolPrompt, candidates, thoughts uint64 }

func (gu *geminiUsage) Take(obj []byte) bool {
	var u struct {
		PromptTokenCount        *uint64 `json:"promptTokenCount"`
		CandidatesTokenCount    *uint64 `json:"candidatesTokenCount"`
		CachedContentTokenCount *uint64 `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      *uint64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount *uint64 `json:"toolUsePromptTokenCount"`
	}
	if json.Unmarshal(obj, &u) != nil {
		return false
	}
	any := set(&gu.prompt, u.PromptTokenCount)
	any = set(&gu.candidates, u.CandidatesTokenCount) || any
	any = set(&gu.cached, u.CachedContentTokenCount) || any
	any = set(&gu.thoughts, u.ThoughtsTokenCount) || any
	any = set(&gu.toolPrompt, u.ToolUsePromptTokenCount) || any
	return any
}

func (gu *geminiUsage) Usage() (wire.Tokens, ToolUses) {
	cached := min(gu.cached, gu.prompt)
	return wire.Tokens{InputTokens: gu.prompt - cached + gu.toolPrompt, OutputTokens: gu.candidates + gu.thoughts, CacheReadTokens: cached}, ToolUses{}
}

// googleStatus is the status word Google's APIs give an HTTP status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}
