package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/flockrun/flock/spec"
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

// ReasonTool is a refusal of a server tool or beta the grant does not
// allow, or of a tool the gateway does not know (the journal's REASON=).
const ReasonTool = "server-tool"

// refusal is a request its grant does not allow: a 403 naming what it
// asked for, why that is held back, and the grant's field that allows it.
type refusal struct {
	provider string
	asks     string // what the request asks for, and where
	why      string // what it would do
	allow    string // the setting that allows it ("": nothing does)
}

func (r *refusal) Error() string { return r.line(0) }

// line is the refusal's words for agent id.
func (r *refusal) line(id int) string {
	s := "the request asks for " + r.asks + ", " + r.why
	if r.allow != "" {
		s += fmt.Sprintf("; allow it with %s in agents[id=%d].models.%s", r.allow, id, r.provider)
	}
	return s
}

// judged is how the gateway answers a body judge refused: a refusal is
// a 403, anything else (a badBody) a 400 naming the problem.
func judged(err error, agent int) (reason string, status int, line string) {
	var r *refusal
	if errors.As(err, &r) {
		return ReasonTool, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d: %s", agent, r.line(agent))
	}
	return ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: %v", agent, err)
}

// toolWhy is what each server tool does that a grant must allow.
var toolWhy = map[spec.ServerTool]string{
	spec.ToolWebSearch:       "which reaches the network from the provider, outside the agent's egress, and is charged per search",
	spec.ToolWebFetch:        "which fetches any URL from the provider, outside the agent's egress",
	spec.ToolCodeExecution:   "which runs code in the provider's container, outside the agent's box, and is charged for the container's time",
	spec.ToolMCP:             "which connects from the provider to the MCP servers the request names, outside the agent's egress",
	spec.ToolFileSearch:      "which searches the files stored with the provider's account, beyond what the agent sent, and is charged per search",
	spec.ToolImageGeneration: "which is charged per image, beside the tokens",
}

// toolRefusal is the refusal of tool t, asked for where, under grant g.
func toolRefusal(g spec.Grant, t spec.ServerTool, where string) *refusal {
	list := make([]string, 0, len(g.ServerTools)+1)
	for _, have := range g.ServerTools {
		list = append(list, string(have))
	}
	list = append(list, string(t))
	return &refusal{provider: g.Provider, asks: fmt.Sprintf("the provider's %s tool (%s)", t, where), why: toolWhy[t],
		allow: "server_tools: [" + strings.Join(list, ", ") + "]"}
}

// unknownTool is the refusal of tools[i], of a type the gateway does not
// know (typ; "" none); use says what the request may use instead.
func unknownTool(g spec.Grant, i int, typ, use string) *refusal {
	asks := fmt.Sprintf("a tool of type %s (tools[%d])", quoted(typ), i)
	if typ == "" {
		asks = fmt.Sprintf("a tool with no type (tools[%d])", i)
	}
	return &refusal{provider: g.Provider, asks: asks,
		why: "which flock does not know: a provider-side tool it does not know is refused, as it may reach the network or run code at the provider; use " + use}
}

// toolsUse is what unknownTool says a request of kind may use: the
// client's own tools (own), or the server tools a grant may allow.
func toolsUse(kind spec.ProviderKind, own string) string {
	var known []string
	for _, t := range spec.ServerToolsOf(kind) {
		known = append(known, string(t))
	}
	return "the client's own tools (" + own + ") or a provider's tool a grant may allow (server_tools: " + strings.Join(known, ", ") + ")"
}

// checkTool refuses server tool t unless g allows it.
func checkTool(g spec.Grant, t spec.ServerTool, where string) error {
	if g.AllowsTool(t) {
		return nil
	}
	return toolRefusal(g, t, where)
}

// anthropicClientTool is a tool Anthropic defines and the client runs
// (bash, the text editor, computer use, memory): its calls come back to
// the client like its own tools'.
var anthropicClientTool = regexp.MustCompile(`^(bash|text_editor|computer|memory)_[0-9]{8}$`)

// anthropicToolKind says what a Messages tool's type is: the client's
// own or one Anthropic defines for the client to run (client), a server
// tool (tool), or neither (unknown).
func anthropicToolKind(typ string) (tool spec.ServerTool, client bool) {
	switch {
	case typ == "" || typ == "custom" || anthropicClientTool.MatchString(typ):
		return "", true
	case strings.HasPrefix(typ, "web_search_"):
		return spec.ToolWebSearch, false
	case strings.HasPrefix(typ, "web_fetch_"):
		return spec.ToolWebFetch, false
	case strings.HasPrefix(typ, "code_execution_"), strings.HasPrefix(typ, "bash_code_execution"), strings.HasPrefix(typ, "text_editor_code_execution"):
		return spec.ToolCodeExecution, false
	case typ == "mcp_toolset":
		return spec.ToolMCP, false
	case strings.HasPrefix(typ, "tool_search_tool_"):
		// Anthropic's tool search looks through the request's own tool
		// definitions: it reaches nothing and runs nothing.
		return "", true
	}
	return "", false
}

// anthropicTools judges a Messages request's tools, MCP servers,
// container skills and beta headers against grant g.
func anthropicTools(b *reqBody, h http.Header, g spec.Grant) error {
	err := eachTool(b, func(i int, typ string) error {
		t, client := anthropicToolKind(typ)
		switch {
		case client:
			return nil
		case t != "":
			return checkTool(g, t, fmt.Sprintf("tools[%d].type %s", i, quoted(typ)))
		}
		return unknownTool(g, i, typ, toolsUse(spec.KindAnthropic, `no type or "custom", and Anthropic's bash, text_editor, computer and memory`))
	})
	if err != nil {
		return err
	}
	if m, ok := b.get("mcp_servers"); ok {
		servers, err := b.elements(m, "mcp_servers")
		if err != nil {
			return err
		}
		if len(servers) > 0 {
			if err := checkTool(g, spec.ToolMCP, "mcp_servers"); err != nil {
				return err
			}
		}
	}
	if m, ok := b.get("container"); ok && len(b.value(m)) > 0 && b.value(m)[0] == '{' {
		c, err := b.object(m, "container")
		if err != nil {
			return err
		}
		if s, ok := lookup(c, "skills"); ok {
			skills, err := b.elements(s, "container.skills")
			if err != nil {
				return err
			}
			if len(skills) > 0 {
				if err := checkTool(g, spec.ToolCodeExecution, "container.skills, which run in the code execution container"); err != nil {
					return err
				}
			}
		}
	}
	return checkBetas(h, g)
}

// betaWhy says what a guarded anthropic-beta prefix turns on.
var betaWhy = map[string]string{
	"mcp-client-":     "which turns on the MCP connector: the provider connects to the MCP servers the request names, outside the agent's egress",
	"code-execution-": "which turns on code execution in the provider's container, outside the agent's box",
	"web-fetch-":      "which turns on web fetch: the provider fetches any URL, outside the agent's egress",
	"skills-":         "which turns on skills, code run in the provider's container",
	"files-api-":      "which turns on files stored with the provider, which the gateway does not carry and cannot see",
}

// checkBetas refuses an anthropic-beta value that turns on a guarded
// feature (spec.GuardedBeta) unless g lists it; every other passes
// (Claude Code sends several). The header may come more than once, each
// a comma-separated list.
func checkBetas(h http.Header, g spec.Grant) error {
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			b = strings.ToLower(strings.Trim(b, " \t"))
			if b == "" || g.AllowsBeta(b) {
				continue
			}
			why := ""
			for _, p := range spec.GuardedBetas {
				if strings.HasPrefix(b, p) {
					why = betaWhy[p]
				}
			}
			list := append(append([]string(nil), g.Betas...), b)
			return &refusal{provider: g.Provider, asks: "the beta feature " + quoted(b) + " (its anthropic-beta header)", why: why,
				allow: "betas: [" + strings.Join(list, ", ") + "]"}
		}
	}
	return nil
}

// openaiClientTools are the tool types of the Responses API the client
// runs itself.
var openaiClientTools = []string{"function", "custom", "computer_use_preview", "local_shell", "shell", "apply_patch"}

// openaiResponseTool says what a Responses tool's type is, as
// anthropicToolKind does.
func openaiResponseTool(typ string) (tool spec.ServerTool, client bool) {
	for _, c := range openaiClientTools {
		if typ == c {
			return "", true
		}
	}
	switch {
	case typ == "web_search" || typ == "web_search_preview" || strings.HasPrefix(typ, "web_search_2") || strings.HasPrefix(typ, "web_search_preview_2"):
		return spec.ToolWebSearch, false
	case typ == "file_search":
		return spec.ToolFileSearch, false
	case typ == "code_interpreter":
		return spec.ToolCodeExecution, false
	case typ == "mcp":
		return spec.ToolMCP, false
	case typ == "image_generation":
		return spec.ToolImageGeneration, false
	}
	return "", false
}

// responsesTools judges a Responses request's tools against grant g.
func responsesTools(b *reqBody, g spec.Grant) error {
	return eachTool(b, func(i int, typ string) error {
		t, client := openaiResponseTool(typ)
		switch {
		case client:
			return nil
		case t != "":
			return checkTool(g, t, fmt.Sprintf("tools[%d].type %s", i, quoted(typ)))
		}
		return unknownTool(g, i, typ, toolsUse(spec.KindOpenAI, strings.Join(quoteAll(openaiClientTools), ", ")))
	})
}

// chatTools judges a Chat Completion's tools (the client's functions
// only: Chat Completions has no server tools), its web_search_options
// and its model: OpenAI's search models search the web on every request.
func chatTools(b *reqBody, g spec.Grant) error {
	err := eachTool(b, func(i int, typ string) error {
		if typ == "function" || typ == "custom" {
			return nil
		}
		return unknownTool(g, i, typ, `"function" or "custom" (Chat Completions' only provider tool is web search, through web_search_options; the Responses API has the others)`)
	})
	if err != nil {
		return err
	}
	if m, ok := b.get("web_search_options"); ok && string(b.value(m)) != "null" {
		if err := checkTool(g, spec.ToolWebSearch, "web_search_options"); err != nil {
			return err
		}
	}
	if m, ok := b.get("model"); ok {
		model, err := b.stringOf(m, "model")
		if err != nil {
			return err
		}
		if strings.Contains(model, "-search-") {
			return checkTool(g, spec.ToolWebSearch, "the model "+quoted(model)+", which searches the web on every request")
		}
	}
	return nil
}

// eachTool calls f with each of the body's tools[] entries' index and
// type ("" absent or null), each entry an object read with the top
// level's checks (no key twice).
func eachTool(b *reqBody, f func(i int, typ string) error) error {
	m, ok := b.get("tools")
	if !ok {
		return nil
	}
	tools, err := b.elements(m, "tools")
	if err != nil {
		return err
	}
	for i, el := range tools {
		name := fmt.Sprintf("tools[%d]", i)
		ms, err := b.object(el, name)
		if err != nil {
			return err
		}
		typ := ""
		if t, ok := lookup(ms, "type"); ok {
			if typ, err = b.stringOf(t, name+".type"); err != nil {
				return err
			}
		}
		if err := f(i, typ); err != nil {
			return err
		}
	}
	return nil
}

// stringOf reads the string that is m's value, decoded ("" for null);
// anything else is refused.
func (b *reqBody) stringOf(m member, name string) (string, error) {
	v := b.value(m)
	switch {
	case string(v) == "null":
		return "", nil
	case v[0] != '"':
		return "", badBody(fmt.Sprintf("%s is %s; it must be a string", name, short(v)))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", badBody(fmt.Sprintf("%s is not a string the gateway can read: %v", name, err))
	}
	return s, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quoted(s)
	}
	return out
}

// ToolUses are one request's uses of each server tool, in the order of
// spec.ServerTools.
type ToolUses [len(spec.ServerTools)]uint64

// toolIndex is t's place in ToolUses.
func toolIndex(t spec.ServerTool) int {
	for i, s := range spec.ServerTools {
		if s == t {
			return i
		}
	}
	panic("gateway: no server tool " + string(t))
}

// Of is the uses of t.
func (u ToolUses) Of(t spec.ServerTool) uint64 { return u[toolIndex(t)] }

// Map is u by tool name, the tools used only (nil: none).
func (u ToolUses) Map() map[string]uint64 {
	var out map[string]uint64
	for i, n := range u {
		if n > 0 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[string(spec.ServerTools[i])] = n
		}
	}
	return out
}
