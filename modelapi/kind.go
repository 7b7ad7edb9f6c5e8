// Package modelapi is what flock knows of each model API it carries: a
// provider kind is one file here that registers itself (anthropic.go,
// openai.go, gemini.go). The kind says where its key goes, which
// endpoints the gateway carries and how each is judged and metered, how
// its errors are written, which variables its SDKs read, and which
// request the audit sends; the spec, the gateway, the units and the
// audit ask the registry and never a kind's name.
//
// The rest of the package is what every kind shares: the request body
// read without maps (body.go), the answer followed byte by byte (scan.go,
// meter.go), and the provider-side tools a grant must allow (tools.go).
package modelapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Kind is one model API, declared as data.
type Kind struct {
	// Name is the spec's word for it (kind: anthropic).
	Name string
	// About says what speaks it, for a fix: "the Messages API".
	About string
	// ExampleURL is its public base URL, for a fix.
	ExampleURL string
	// BaseURLEnv and KeyEnv are the variables its official SDKs and
	// tools read: the gateway's URL goes in the first, a placeholder in
	// the second (an SDK refuses to start without a key).
	BaseURLEnv, KeyEnv string
	// Auth puts the provider's key on a request.
	Auth func(h http.Header, key string)
	// Dropped are the client's headers, beside every kind's, never
	// forwarded: its own ways to send a key or change what an answer
	// holds.
	Dropped []string
	// Query judges a request's query before anything else is read: a
	// parameter that would send a key, or change what the answer holds,
	// is refused (nil: any query passes).
	Query func(q url.Values, e Endpoint) error
	// Endpoints are what the gateway carries: only what it can meter.
	Endpoints []Endpoint
	// ModelIn is the model a request's path names (Gemini's); nil: the
	// body's "model" names it.
	ModelIn func(path string) string
	// Usage reads the usage objects the kind's answers report.
	Usage UsageFormat
	// Error is the body its API writes for an error: an SDK raises its
	// usual exception with the message flock gives.
	Error func(status int, msg string) any
	// ServerTools are the provider-side tools it offers, which a grant
	// may list.
	ServerTools []ServerTool
	// Betas are the prefixes of its beta header's values that turn on
	// what a grant must list (nil: it has no beta header).
	Betas []string
	// Probe is the audit's requests to it (probe.go).
	Probe Probe
}

// Endpoint is one API path the gateway carries.
type Endpoint struct {
	Method string
	// Path is relative to the provider's base URL; {name} is one
	// segment's worth of an id (no / or :).
	Path string
	// Judge reads the request's body (nil: the endpoint takes none).
	Judge Judge
	// Spends: its answers report a usage, and count against the limits.
	Spends bool
}

// Judge checks a request's body against what its grant allows and says
// what the gateway makes of it (a BadBody is a 400, a NotAllowed a 403).
type Judge func(b *Body, h http.Header, g Allowed) (Plan, error)

// Read judges b by e's judge: what the judge says, else a key it read
// that b writes otherwise than the API names it.
func (e Endpoint) Read(b *Body, h http.Header, g Allowed) (Plan, error) {
	p, err := e.Judge(b, h, g)
	if err == nil {
		err = b.Err()
	}
	return p, err
}

// Plan is what the gateway makes of a request's body: the most output it
// may ask for (its maximum, times its choices), and the edits it is sent
// with.
type Plan struct {
	MaxOutput uint64
	Edits     []Edit
}

// Probe is what the audit asks of a kind: a request that spends nothing,
// a request that spends at most a token, and the same asking for a tool
// that reaches the network, which a grant without it refuses.
type Probe struct {
	List      string // GET: the models
	Send      string // POST: a request that spends
	Ask, Tool string // Send's bodies
}

var (
	mu    sync.RWMutex
	kinds = map[string]*Kind{}
)

// Register adds kind k; a kind's file calls it from init. A name twice
// is a programming error.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[k.Name]; dup || k.Name == "" {
		panic(fmt.Sprintf("modelapi: kind %q registered twice or unnamed", k.Name))
	}
	kinds[k.Name] = &k
}

// Lookup is the kind called name.
func Lookup(name string) (*Kind, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Names are every kind's name, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(kinds))
	for n := range kinds {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Choices says each kind and what speaks it, for a fix: "anthropic (the
// Messages API) or openai (...)".
func Choices() string {
	var out []string
	for _, n := range Names() {
		k, _ := Lookup(n)
		out = append(out, n+" ("+k.About+")")
	}
	return or(out)
}

func or(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// Endpoint is the endpoint of k that method and path (relative to the
// base URL) reach.
func (k *Kind) Endpoint(method, path string) (Endpoint, bool) {
	for _, e := range k.Endpoints {
		if e.Method == method && matchPath(e.Path, path) {
			return e, true
		}
	}
	return Endpoint{}, false
}

// EndpointList names k's endpoints for an error.
func (k *Kind) EndpointList() string {
	out := make([]string, len(k.Endpoints))
	for i, e := range k.Endpoints {
		out[i] = e.Method + " " + e.Path
	}
	return strings.Join(out, ", ")
}

// ModelOf is the model a request of kind k to path (relative to the base
// URL) with body b asks for: what it is priced by ("": none named).
func ModelOf(k *Kind, path string, b *Body) string {
	if k.ModelIn != nil {
		return k.ModelIn(path)
	}
	if m, ok := b.get("model"); ok {
		s, _ := b.stringOf(m, "model")
		return s
	}
	return ""
}

// OffersTool says whether k's provider runs tool t.
func (k *Kind) OffersTool(t ServerTool) bool { return slices.Contains(k.ServerTools, t) }

// ErrorBody is the body of an error of kind k (nil: the provider is not
// known, a body every SDK reads).
func ErrorBody(k *Kind, status int, msg string) any {
	if k == nil {
		return map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg, "code": openaiCode(status)}}
	}
	return k.Error(status, msg)
}

// matchPath says whether path is pattern's: each {name} in it stands for
// one or more bytes, none of them a / or the byte that follows it in the
// pattern (an OpenAI model's id holds colons; a Gemini model's ends at
// the colon before its method).
func matchPath(pattern, path string) bool {
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return pattern == path
		}
		if !strings.HasPrefix(path, pattern[:i]) {
			return false
		}
		path, pattern = path[i:], pattern[i+strings.IndexByte(pattern[i:], '}')+1:]
		stop := "/"
		if pattern != "" {
			stop += pattern[:1]
		}
		n := strings.IndexAny(path, stop)
		if n < 0 {
			n = len(path)
		}
		if n == 0 {
			return false
		}
		path = path[n:]
	}
}
