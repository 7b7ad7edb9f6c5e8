package modelapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Provider-side tools. A request may ask the provider to run a tool
// itself: search the web, fetch a URL, run code in its container, call
// an MCP server, search the account's files, draw an image. The provider
// then reaches the network on the agent's behalf, outside the agent's
// egress rules (a URL the firewall would refuse is one web_fetch away),
// or runs code, and charges each use beside the tokens. So the gateway
// lets through only the tools the agent's grant lists (server_tools) and
// the anthropic-beta values that turn such tools on (betas); a tool it
// does not know is refused too, since a new server tool may reach
// anything. The client's own tools (the model asks, the client runs
// them) pass: they run in the agent's box.

// ServerTool is a tool a provider runs itself when a request asks for it
// (a "server" or "hosted" tool), by flock's one name for every API.
type ServerTool string

const (
	// ToolWebSearch: Anthropic's web_search_*, OpenAI's web_search
	// (Responses) and web_search_options (Chat Completions), Gemini's
	// googleSearch.
	ToolWebSearch ServerTool = "web_search"
	// ToolWebFetch: Anthropic's web_fetch_*, Gemini's urlContext.
	ToolWebFetch ServerTool = "web_fetch"
	// ToolCodeExecution: Anthropic's code_execution_* (and skills, which
	// run in its container), OpenAI's code_interpreter, Gemini's
	// codeExecution.
	ToolCodeExecution ServerTool = "code_execution"
	// ToolMCP: Anthropic's MCP connector (mcp_servers), OpenAI's remote
	// MCP (mcp).
	ToolMCP ServerTool = "mcp"
	// ToolFileSearch: OpenAI's file_search over the account's vector
	// stores, Gemini's fileSearch over its stores.
	ToolFileSearch ServerTool = "file_search"
	// ToolImageGeneration: OpenAI's image_generation.
	ToolImageGeneration ServerTool = "image_generation"
)

// ServerTools are every server tool, in the order a fix lists them and
// the gateway counts them.
var ServerTools = [...]ServerTool{ToolWebSearch, ToolWebFetch, ToolCodeExecution, ToolMCP, ToolFileSearch, ToolImageGeneration}

// Allowed is what an agent's grant of a provider lets its requests ask
// for beyond the model (what spec.Grant.Allowed gives).
type Allowed struct {
	Provider string       // the grant's provider, for the fix
	Tools    []ServerTool // server_tools
	Betas    []string     // betas
	// Limited: the grant counts tokens, so a request needs a maximum.
	Limited bool
}

// AllowsTool says whether a lets its requests use t.
func (a Allowed) AllowsTool(t ServerTool) bool { return slices.Contains(a.Tools, t) }

// Guarded says whether the beta value b turns on what a grant must list:
// it begins with one of guarded (a kind's Betas).
func Guarded(guarded []string, b string) bool {
	for _, p := range guarded {
		if strings.HasPrefix(b, p) {
			return true
		}
	}
	return false
}

// NotAllowed is a request its grant does not allow: a 403 naming what it
// asked for, why that is held back, and the grant's field that allows it.
type NotAllowed struct {
	provider string
	asks     string // what the request asks for, and where
	why      string // what it would do
	allow    string // the setting that allows it ("": nothing does)
}

func (r *NotAllowed) Error() string { return r.Line(0) }

// Line is the refusal's words for agent id.
func (r *NotAllowed) Line(id int) string {
	s := "the request asks for " + r.asks + ", " + r.why
	if r.allow != "" {
		s += fmt.Sprintf("; allow it with %s in agents[id=%d].models.%s", r.allow, id, r.provider)
	}
	return s
}

// toolWhy is what each server tool does that a grant must allow.
var toolWhy = map[ServerTool]string{
	ToolWebSearch:       "which reaches the network from the provider, outside the agent's egress, and is charged per search",
	ToolWebFetch:        "which fetches any URL from the provider, outside the agent's egress",
	ToolCodeExecution:   "which runs code in the provider's container, outside the agent's box, and is charged for the container's time",
	ToolMCP:             "which connects from the provider to the MCP servers the request names, outside the agent's egress",
	ToolFileSearch:      "which searches the files stored with the provider's account, beyond what the agent sent, and is charged per search",
	ToolImageGeneration: "which is charged per image, beside the tokens",
}

// toolRefusal is the refusal of tool t, asked for where, under grant g.
func toolRefusal(g Allowed, t ServerTool, where string) *NotAllowed {
	list := make([]string, 0, len(g.Tools)+1)
	for _, have := range g.Tools {
		list = append(list, string(have))
	}
	list = append(list, string(t))
	return &NotAllowed{provider: g.Provider, asks: fmt.Sprintf("the provider's %s tool (%s)", t, where), why: toolWhy[t],
		allow: "server_tools: [" + strings.Join(list, ", ") + "]"}
}

// unknownTool is the refusal of tools[i], of a type the gateway does not
// know (typ; "" none); use says what the request may use instead.
func unknownTool(g Allowed, i int, typ, use string) *NotAllowed {
	asks := fmt.Sprintf("a tool of type %s (tools[%d])", Quoted(typ), i)
	if typ == "" {
		asks = fmt.Sprintf("a tool with no type (tools[%d])", i)
	}
	return &NotAllowed{provider: g.Provider, asks: asks,
		why: "which flock does not know: a provider-side tool it does not know is refused, as it may reach the network or run code at the provider; use " + use}
}

// toolsUse is what unknownTool says a request may use: the client's own
// tools (own), or the server tools its kind offers (offered).
func toolsUse(offered []ServerTool, own string) string {
	var known []string
	for _, t := range offered {
		known = append(known, string(t))
	}
	return "the client's own tools (" + own + ") or a provider's tool a grant may allow (server_tools: " + strings.Join(known, ", ") + ")"
}

// checkTool refuses server tool t unless g allows it.
func checkTool(g Allowed, t ServerTool, where string) error {
	if g.AllowsTool(t) {
		return nil
	}
	return toolRefusal(g, t, where)
}

// eachTool calls f with each of the body's tools[] entries' index and
// type ("" absent or null), each entry an object read with the top
// level's checks (no key twice).
func eachTool(b *Body, f func(i int, typ string) error) error {
	m, ok := b.get("tools")
	if !ok {
		return nil
	}
	return b.eachObject(m, "tools", func(i int, name string, ms []member) error {
		typ := ""
		if t, ok := b.lookup(ms, "type"); ok {
			var err error
			if typ, err = b.stringOf(t, name+".type"); err != nil {
				return err
			}
		}
		return f(i, typ)
	})
}

// eachObject calls f with each element of the array that is m's value
// (called name), its name (name[i]) and its members, each an object read
// with the top level's checks (no key twice).
func (b *Body) eachObject(m member, name string, f func(i int, item string, ms []member) error) error {
	els, err := b.elements(m, name)
	if err != nil {
		return err
	}
	for i, el := range els {
		item := fmt.Sprintf("%s[%d]", name, i)
		ms, err := b.object(el, item)
		if err != nil {
			return err
		}
		if err := f(i, item, ms); err != nil {
			return err
		}
	}
	return nil
}

// stringOf reads the string that is m's value, decoded ("" for null);
// anything else is refused.
func (b *Body) stringOf(m member, name string) (string, error) {
	v := b.value(m)
	switch {
	case string(v) == "null":
		return "", nil
	case v[0] != '"':
		return "", BadBody(fmt.Sprintf("%s is %s; it must be a string", name, short(v)))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", BadBody(fmt.Sprintf("%s is not a string the gateway can read: %v", name, err))
	}
	return s, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Quoted(s)
	}
	return out
}

// ToolUses are one request's uses of each server tool, in the order of
// ServerTools.
type ToolUses [len(ServerTools)]uint64

// toolIndex is t's place in ToolUses.
func toolIndex(t ServerTool) int {
	for i, s := range ServerTools {
		if s == t {
			return i
		}
	}
	panic("gateway: no server tool " + string(t))
}

// Of is the uses of t.
func (u ToolUses) Of(t ServerTool) uint64 { return u[toolIndex(t)] }

// Map is u by tool name, the tools used only (nil: none).
func (u ToolUses) Map() map[string]uint64 {
	var out map[string]uint64
	for i, n := range u {
		if n > 0 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[string(ServerTools[i])] = n
		}
	}
	return out
}
