package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// Model APIs: the operator names each provider once (providers:), and
// grants agents providers with limits (an agent's models:). An agent
// reaches its grants through flock-proxy, which knows it by the uid of
// its socket and injects the provider's key: no key is ever the agent's.

// ProviderKind is the API a provider speaks: the name of a kind
// registered in modelapi (anthropic, gemini, openai).
type ProviderKind string

// Provider is one model API.
type Provider struct {
	Name string // [a-z0-9-]: the gateway's path, the grant's key
	Kind ProviderKind
	// URL is the upstream's base URL without a trailing slash: an
	// https:// URL, or http:// to a loopback address (a model server on
	// this host). A request to <gateway>/<name>/P goes to URL + /P.
	URL string
	// KeyFile is a root-only file holding the API key; "" for a server
	// that needs none. Only flock-proxy.service is handed it.
	KeyFile string
	// CAFile is a PEM file of the roots that sign the upstream's
	// certificate (a private gateway); "" trusts the system's roots.
	CAFile string
	// Prices are the operator's prices of its models, by model id or a
	// prefix of it: they come before the table flock ships for its kind
	// (a model it lacks, a price negotiated, a server of one's own).
	Prices map[string]modelapi.Price `json:",omitempty"`
}

// Grant is one provider an agent may call, with its limits; a zero limit
// is none.
type Grant struct {
	Provider          string
	RequestsPerMinute int
	TokensPerDay      uint64
	TokensPerMonth    uint64
	// USDPerDay and USDPerMonth limit what its requests cost, at the
	// model's price (modelapi.Prices).
	USDPerDay, USDPerMonth wire.PicoUSD
	Concurrent             int // requests at once
	// ServerTools are the provider-side tools its requests may ask for
	// (none unless listed): the provider runs them on the agent's behalf,
	// reaching the network outside the agent's egress or running code,
	// and charges each use beside the tokens.
	ServerTools []ServerTool
	// Betas are the anthropic-beta values that turn such tools on which
	// its requests may send (GuardedBeta); any other beta passes.
	Betas []string
}

// ServerTool is a provider-side tool, by flock's one name for every API.
type ServerTool = modelapi.ServerTool

// Allowed is what g lets its requests ask for beyond the model: what the
// gateway judges a request's body by.
func (g Grant) Allowed() modelapi.Allowed {
	return modelapi.Allowed{Provider: g.Provider, Tools: g.ServerTools, Betas: g.Betas, Limited: g.TokensPerDay > 0 || g.TokensPerMonth > 0}
}

// Limited says whether g has any limit.
func (g Grant) Limited() bool {
	return g.RequestsPerMinute > 0 || g.Concurrent > 0 || g.Spending().Any()
}

// Limits are g's limits as the proxy's reports carry them.
func (g Grant) Limits() wire.ModelLimits {
	return wire.ModelLimits{RequestsPerMinute: g.RequestsPerMinute, TokensPerDay: g.TokensPerDay, TokensPerMonth: g.TokensPerMonth,
		USDPerDay: g.USDPerDay, USDPerMonth: g.USDPerMonth, Concurrent: g.Concurrent}
}

// Spending are g's limits of tokens and money.
func (g Grant) Spending() MoneyLimits {
	return MoneyLimits{TokensPerDay: g.TokensPerDay, TokensPerMonth: g.TokensPerMonth, USDPerDay: g.USDPerDay, USDPerMonth: g.USDPerMonth}
}

// Provider returns the provider called name.
func (f *Flock) Provider(name string) (Provider, bool) {
	for _, p := range f.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Limits of a grant's fields, for the spec and the proxy alike.
const (
	MaxRequestsPerMinute = 100000
	MaxConcurrent        = 10000
	MaxTokens            = modelapi.MaxTokens
)

const (
	providersExample = `providers: [{name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}]`
	modelsExample    = `models: {anthropic: {requests_per_minute: 60, tokens_per_day: 2M}}`
	toolsExample     = "server_tools: [web_search]"
	betasExample     = "betas: [mcp-client-2025-11-20]"
	keyFileExample   = "/etc/flock/keys/anthropic"
	pricesExample    = "prices: {my-model: {input: 1, output: 2, cache_read: 0.1, cache_write: 1.25}}"
)

var providerNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// providers reads the model APIs: a list of {name, kind, url, key_file,
// ca_file}, names unique. It returns them in the spec's order.
func (w *walker) providers(n *yaml.Node, path, root string) []Provider {
	if n.Kind != yaml.SequenceNode {
		w.providersIncomplete = true
		w.fail(path, "is %s; list the model APIs, e.g. %s", kindName(n), providersExample)
		return nil
	}
	var out []Provider
	seen := map[string]int{}
	w.providerKinds = map[string]ProviderKind{}
	for i, item := range n.Content {
		p := index(path, i)
		fs, ok := w.fields(item, p, providerKeys...)
		if !ok {
			continue
		}
		pr := Provider{}
		name, good := w.itemName(fs, path, i, "provider", "anthropic", seen)
		pr.Name = name
		if kn, given := fs["kind"]; !given {
			w.fail(join(p, "kind"), "missing; write kind: %s", modelapi.Choices())
			good = false
		} else if k, ok := oneOf(w, kn, join(p, "kind"), "a provider kind", modelapi.Choices(), "anthropic", modelapi.Names()...); ok {
			pr.Kind = ProviderKind(k)
		} else {
			good = false
		}
		if un, given := fs["url"]; !given {
			w.fail(join(p, "url"), "missing; give the API's base URL, e.g. url: https://api.anthropic.com (or http://127.0.0.1:11434/v1 for a server on this host)")
			good = false
		} else if u, ok := w.providerURL(un, join(p, "url")); ok {
			pr.URL = u
		} else {
			good = false
		}
		if kn, given := fs["key_file"]; given {
			pr.KeyFile = w.secretPath(kn, join(p, "key_file"), root, keyFileExample)
		}
		if cn, given := fs["ca_file"]; given {
			pr.CAFile = w.secretPath(cn, join(p, "ca_file"), root, "/etc/flock/keys/corp-ca.pem")
		}
		if pn, given := fs["prices"]; given {
			pr.Prices = w.prices(pn, join(p, "prices"))
		}
		if good {
			out = append(out, pr)
			w.providerKinds[pr.Name] = pr.Kind
		} else {
			w.providersIncomplete = true
		}
	}
	return out
}

// itemName reads the name of item i of the list at path (providers,
// secrets): lower-case letters, digits and -, at most 32, unique among
// seen, which it records.
func (w *walker) itemName(fs map[string]*yaml.Node, path string, i int, what, example string, seen map[string]int) (string, bool) {
	p := join(index(path, i), "name")
	nn, given := fs["name"]
	if !given {
		w.fail(p, "missing; name every %s, e.g. name: %s", what, example)
		return "", false
	}
	s, ok := w.str(nn, p, example)
	switch {
	case !ok:
		return "", false
	case !providerNameRe.MatchString(s):
		w.fail(p, "%q is not a %s name; use lower-case letters, digits and -, at most 32, e.g. %s", s, what, example)
		return "", false
	}
	if j, dup := seen[s]; dup {
		w.fail(p, "%q is already the name of %s; give every %s its own name", s, index(path, j), what)
		return "", false
	}
	seen[s] = i
	return s, true
}

// prices reads a provider's prices: a mapping of model ids (or their
// prefixes) to their prices in USD per million tokens, input and output
// required.
func (w *walker) prices(n *yaml.Node, path string) map[string]modelapi.Price {
	if n.Kind != yaml.MappingNode {
		w.fail(path, "is %s; write a mapping of model ids to their prices in USD per million tokens, e.g. %s", kindName(n), pricesExample)
		return nil
	}
	out := map[string]modelapi.Price{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		id, v := n.Content[i].Value, n.Content[i+1]
		p := join(path, id)
		if _, dup := out[id]; dup || id == "" {
			w.fail(p, "given twice or empty; give each model id once")
			continue
		}
		fs, ok := w.fields(v, p, modelapi.PriceKeys...)
		if !ok {
			continue
		}
		usd, good := map[string]string{}, true
		for _, k := range modelapi.PriceKeys {
			x, given := fs[k]
			switch {
			case !given && (k == "input" || k == "output"):
				w.fail(join(p, k), "missing; give the model's %s price in USD per million tokens, e.g. %s", k, pricesExample)
				good = false
			case !given:
			case x.Kind != yaml.ScalarNode || (x.Tag != "!!int" && x.Tag != "!!float"):
				w.fail(join(p, k), "%s is not a number; write USD per million tokens, e.g. 0.25", kindName(x))
				good = false
			default:
				if v, err := wire.ParseUSD(x.Value); err != nil {
					w.fail(join(p, k), "%v (USD per million tokens)", err)
					good = false
				} else if v%1e6 != 0 {
					w.fail(join(p, k), "%q has more than 6 decimals; write a price per million tokens to $0.000001", x.Value)
					good = false
				}
				usd[k] = x.Value
			}
		}
		if !good {
			continue
		}
		pr, err := modelapi.ParsePrice(usd["input"], usd["output"], usd["cache_read"], usd["cache_write"], usd["cache_write_long"])
		if err != nil {
			w.fail(p, "%v", err)
			continue
		}
		out[id] = pr
	}
	return out
}

// ProviderURLProblem says what is wrong with s as a provider's base URL
// ("" nothing) and returns it without a trailing slash: https:// to a
// name or an address, or http:// to a loopback address (a model server
// on this host: plain HTTP never leaves it).
func ProviderURLProblem(s string) (string, string) {
	const fix = "write an https:// URL such as https://api.anthropic.com, or http:// to this host's loopback, e.g. http://127.0.0.1:11434/v1 for Ollama"
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return "", fmt.Sprintf("%q is not a URL; %s", s, fix)
	case u.User != nil:
		return "", fmt.Sprintf("%q holds a user or password; the key belongs in key_file, which only flock-proxy reads", s)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return "", fmt.Sprintf("%q has a query or fragment; give the base URL alone", s)
	}
	host := u.Hostname()
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Sprintf("%q has port %q, not 1-65535", s, p)
		}
	}
	switch u.Scheme {
	case "https":
		if a, err := netip.ParseAddr(host); err == nil && (a.IsUnspecified() || a.IsMulticast()) {
			return "", fmt.Sprintf("%q is not one host's address; %s", s, fix)
		}
	case "http":
		a, err := netip.ParseAddr(host)
		if host != "localhost" && (err != nil || !a.Unmap().IsLoopback()) {
			return "", fmt.Sprintf("%q is plain HTTP to %s, which would carry the prompts and the key in the clear off this host; use https://, or http:// to a loopback address (127.0.0.1) for a server on this host", s, host)
		}
	default:
		return "", fmt.Sprintf("%q is not https:// or http://; %s", s, fix)
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), ""
}

func (w *walker) providerURL(n *yaml.Node, path string) (string, bool) {
	s, ok := w.str(n, path, "https://api.anthropic.com")
	if !ok {
		return "", false
	}
	u, problem := ProviderURLProblem(s)
	if problem != "" {
		w.fail(path, "%s", problem)
		return "", false
	}
	return u, true
}

// secretPath reads the path of a file only root reads (a key): absolute,
// clean, outside the flock's root, where agents' files are ("": a root
// not known, as in the proxy's config).
func (w *walker) secretPath(n *yaml.Node, path, root, example string) string {
	s, ok := w.absPath(n, path, example)
	if !ok {
		return s
	}
	switch {
	case root != "" && (s == root || strings.HasPrefix(s, root+"/")):
		w.fail(path, "%q is inside the flock's root %s, where agents' files are; keep it where only root reads it, e.g. %s", s, root, example)
	case strings.ContainsAny(s, " \t\n\\%$\"':"):
		w.fail(path, "%q has a space, quote, colon, backslash, %% or $ that a unit file would misread; choose a plain path, e.g. %s", s, example)
	}
	return s
}

// models reads an agent's grants: a mapping of provider names to their
// limits (empty: no limit), in the order written (the first grant of a
// kind is the one the SDKs' variables point at: GrantEnvNames). Whether each provider exists is checked
// once the providers are known (modelRules).
func (w *walker) models(n *yaml.Node, path string) []Grant {
	if n.Kind != yaml.MappingNode {
		w.fail(path, "is %s; write a mapping of provider names to limits, e.g. %s", kindName(n), modelsExample)
		return nil
	}
	var out []Grant
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, v := n.Content[i].Value, n.Content[i+1]
		p := join(path, name)
		if seen[name] {
			w.fail(p, "given twice; keep one")
			continue
		}
		seen[name] = true
		w.providerRef(name, p)
		g := Grant{Provider: name}
		if !isNull(v) {
			fs, ok := w.fields(v, p, grantKeys...)
			if !ok {
				continue
			}
			if x, ok := fs["requests_per_minute"]; ok {
				r, _ := w.integer(x, join(p, "requests_per_minute"), "a number of requests", 1, MaxRequestsPerMinute)
				g.RequestsPerMinute = int(r)
			}
			if x, ok := fs["concurrent"]; ok {
				c, _ := w.integer(x, join(p, "concurrent"), "a number of requests at once", 1, MaxConcurrent)
				g.Concurrent = int(c)
			}
			l := w.moneyLimits(fs, p)
			g.TokensPerDay, g.TokensPerMonth, g.USDPerDay, g.USDPerMonth = l.TokensPerDay, l.TokensPerMonth, l.USDPerDay, l.USDPerMonth
			if x, ok := fs["server_tools"]; ok {
				g.ServerTools = w.serverTools(x, join(p, "server_tools"), name)
			}
			if x, ok := fs["betas"]; ok {
				g.Betas = w.betas(x, join(p, "betas"), name)
			}
		}
		out = append(out, g)
	}
	return out
}

// serverTools reads the provider-side tools a grant of provider allows:
// names of ServerTools, each once, of those its kind offers (when the
// provider is known).
func (w *walker) serverTools(n *yaml.Node, path, provider string) []ServerTool {
	items, ok := w.strList(n, path, toolsExample)
	if !ok {
		return nil
	}
	kind := w.providerKinds[provider]
	offered := modelapi.ServerTools[:]
	if k, ok := modelapi.Lookup(string(kind)); ok {
		offered = k.ServerTools
	}
	var out []ServerTool
	for i, s := range items {
		t, p := ServerTool(s), index(path, i)
		switch {
		case !slices.Contains(modelapi.ServerTools[:], t):
			w.fail(p, "%q is not a server tool; choose %s (the provider-side tools flock knows; any other is refused)", s, or(toolNames(offered)))
		case !slices.Contains(offered, t):
			w.fail(p, "%q is not a server tool of provider %s (kind %s); choose %s", s, provider, kind, or(toolNames(offered)))
		case slices.Contains(out, t):
			w.fail(p, "%q is listed twice; keep one", s)
		default:
			out = append(out, t)
		}
	}
	return out
}

func toolNames(ts []ServerTool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// betaRe is an anthropic-beta value as Anthropic names them
// (mcp-client-2025-11-20).
var betaRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// betas reads the anthropic-beta values a grant of provider allows: an
// Anthropic provider's, each once.
func (w *walker) betas(n *yaml.Node, path, provider string) []string {
	items, ok := w.strList(n, path, betasExample)
	if !ok {
		return nil
	}
	if k, ok := modelapi.Lookup(string(w.providerKinds[provider])); ok && k.Betas == nil {
		w.fail(path, "provider %s is of kind %s, which has no beta headers (anthropic-beta is Anthropic's); remove betas", provider, k.Name)
		return nil
	}
	var out []string
	for i, s := range items {
		p := index(path, i)
		switch {
		case len(s) > 100 || !betaRe.MatchString(s):
			w.fail(p, "%q is not an anthropic-beta value; write one as Anthropic names it, e.g. mcp-client-2025-11-20", s)
		case slices.Contains(out, s):
			w.fail(p, "%q is listed twice; keep one", s)
		default:
			out = append(out, s)
		}
	}
	return out
}

var tokensRe = regexp.MustCompile(`^([0-9]+)([KMG]?)$`)

// tokens reads a number of tokens: a whole number, or with K, M or G
// (1000-based, as providers count: 2M is 2,000,000).
func (w *walker) tokens(n *yaml.Node, path string) uint64 {
	const fix = "write a whole number of tokens, or with K, M or G (1000-based), e.g. 2M"
	m := tokensRe.FindStringSubmatch(n.Value)
	if n.Kind != yaml.ScalarNode || isNull(n) || m == nil {
		w.fail(path, "%s is not a number of tokens; %s", kindName(n), fix)
		return 0
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	mult := map[string]uint64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m[2]]
	if err != nil || v == 0 || v > MaxTokens/mult {
		w.fail(path, "%s is out of range; write from 1 to %d", n.Value, uint64(MaxTokens))
		return 0
	}
	return v * mult
}

// grantEnvRules checks that agent a's env does not set what flock sets
// for its grants.
func (w *walker) grantEnvRules(a Agent, path string) {
	for _, g := range a.Models {
		for _, k := range GrantEnvNames(w.providerKinds[g.Provider]) {
			if _, set := a.Env[k]; set {
				w.fail(join(join(path, "env"), k), "flock sets %s itself for the grant of provider %s (its base URL is flock-proxy's, its key a placeholder: the real key stays with flock-proxy); remove it", k, g.Provider)
			}
		}
	}
}

// providerRef checks that a grant names one of the spec's providers,
// where the grant is written.
func (w *walker) providerRef(name, path string) {
	switch {
	case w.providersIncomplete:
	case len(w.providerKinds) == 0:
		w.fail(path, "%q names a provider, but the spec lists none; add it, e.g. %s", name, providersExample)
	case w.providerKinds[name] == "":
		w.fail(path, "%q is not one of the providers; choose %s, or add it to providers", name, or(slices.Sorted(maps.Keys(w.providerKinds))))
	}
}

// GrantEnvNames are the variables an agent's unit gets for its grant of
// a provider of kind k: the base URL the official SDKs and tools read,
// and the key they insist on, a placeholder.
func GrantEnvNames(k ProviderKind) []string {
	if kind, ok := modelapi.Lookup(string(k)); ok {
		return []string{kind.BaseURLEnv, kind.KeyEnv}
	}
	return nil
}

// GrantURLEnv is the variable that holds the gateway's URL of provider
// name for every agent granted it, whatever its kind:
// FLOCK_MODEL_URL_<NAME>, the name upper-cased and - as _.
func GrantURLEnv(name string) string {
	return "FLOCK_MODEL_URL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// GatewayURL is the base URL of provider name at the proxy listening on
// listen (host:port): what an agent's SDK is pointed at.
func GatewayURL(listen, name string) string {
	return "http://" + listen + "/" + name
}

// HasModels says whether agent a is granted a model API, so reaches the
// proxy (its gateway is at DefaultProxyListen).
func (a Agent) HasModels() bool { return len(a.Models) > 0 }

// NeedsProxy says whether agent a reaches flock-proxy: for the names in
// its egress, or for the model APIs it is granted.
func (a Agent) NeedsProxy() bool { return a.HasNames() || a.HasModels() }
