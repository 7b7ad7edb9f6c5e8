package modelapi

// toolScan is the meter's reading of the provider-side tools an answer
// used, beside its usage: docScanner hands it each string value as it
// passes (str), and it keeps the few it looks for, short, at the places
// the APIs name their tool calls:
//
//   - OpenAI's Responses: output[].type in an answer, response.output[].type
//     in a stream's response.completed (or .incomplete, .failed), and
//     item.type in its response.output_item.added and .done events (the
//     event's type is its top-level type, which OpenAI writes first);
//     web_search_call, file_search_call, code_interpreter_call, mcp_call
//     and image_generation_call are each one use.
//   - Anthropic's Messages: content[] in an answer and content_block in a
//     stream's content_block_start, a server_tool_use block by its name
//     (type first, then name, as Anthropic writes them) and an
//     mcp_tool_use block; its usage.server_tool_use counts are the
//     meter's (rawUsage).
//
// Each place counts apart, and a tool's uses are the most any place
// counted: a stream names each call when it is added, when it is done
// and again at its end, so none is counted twice, and a stream cut short
// still counts the calls that passed.
type toolScan struct {
	in    bool      // the string being read is a value the scan keeps
	place toolPlace // where it is
	depth int       // at which depth
	buf   []byte    // its bytes so far, at most maxToolValue+1
	event toolEvent // the type of the stream's event being read
	// serverBlock: the last Anthropic block type read at the content
	// level (content[] or content_block) was server_tool_use, whose name
	// is still to come.
	serverBlock bool
	uses        [toolSources]ToolUses
}

type toolPlace uint8

const (
	placeNone     toolPlace = iota
	placeEvent              // type, at the top
	placeItem               // item.type
	placeOutput             // output[].type
	placeResponse           // response.output[].type
	placeBlock              // content_block.type or .name
	placeContent            // content[].type or .name
)

type toolEvent uint8

const (
	eventOther toolEvent = iota
	eventItemAdded
	eventItemDone
)

// The places whose counts are kept apart.
const (
	sourceAdded = iota
	sourceDone
	sourceAnswer // output[]
	sourceFinal  // response.output[]
	sourceBlocks // Anthropic's blocks
	toolSources
)

// maxToolValue bounds a value kept: the types and names looked for are
// short.
const maxToolValue = 48

// openaiItemTools are the Responses output items that are one use of a
// server tool each.
var openaiItemTools = map[string]ServerTool{
	"web_search_call":       ToolWebSearch,
	"file_search_call":      ToolFileSearch,
	"code_interpreter_call": ToolCodeExecution,
	"mcp_call":              ToolMCP,
	"image_generation_call": ToolImageGeneration,
}

// anthropicServerTools are the names of Anthropic's server_tool_use
// blocks, by the tool each uses.
var anthropicServerTools = map[string]ServerTool{
	"web_search":                 ToolWebSearch,
	"web_fetch":                  ToolWebFetch,
	"code_execution":             ToolCodeExecution,
	"bash_code_execution":        ToolCodeExecution,
	"text_editor_code_execution": ToolCodeExecution,
}

// str takes the next bytes b of a string the document scanner s is
// reading (end: the string ends with them). It is on the meter's every
// string, so what it passes by is decided in a few comparisons and
// nothing is allocated.
func (t *toolScan) str(s *docScanner, b []byte, end bool) {
	// Inlined where it is called: keys and deeper strings stop here.
	if t.in || !s.isKey && s.depth <= 4 {
		t.read(s, b, end)
	}
}

func (t *toolScan) read(s *docScanner, b []byte, end bool) {
	if t.in && t.depth != s.depth {
		t.in = false // a document cut inside a string: this is another
	}
	if !t.in {
		if t.place = placeOf(s); t.place == placeNone {
			return
		}
		if t.place == placeEvent && len(b) > 0 && b[0] != 'r' {
			t.event = eventOther // not a response.* event: no need to read on
			return
		}
		t.in, t.depth, t.buf = true, s.depth, t.buf[:0]
	}
	if room := maxToolValue + 1 - len(t.buf); room > 0 {
		t.buf = append(t.buf, b[:min(len(b), room)]...)
	}
	if end {
		t.in = false
		t.value(string(s.key[s.depth]) == "type")
	}
}

// placeOf is where the value string s is reading sits, if it is one the
// scan keeps: a type or a name (the only keys of four bytes it wants),
// in an object.
func placeOf(s *docScanner) toolPlace {
	d := s.depth
	k := s.key[d]
	if d < 1 || len(k) != 4 || !s.obj[d] || !s.obj[1] {
		return placeNone
	}
	isType := string(k) == "type"
	if !isType && string(k) != "name" {
		return placeNone
	}
	k1 := s.key[1]
	switch d {
	case 1:
		if isType {
			return placeEvent
		}
	case 2:
		switch {
		case isType && string(k1) == "item":
			return placeItem
		case string(k1) == "content_block":
			return placeBlock
		}
	case 3:
		switch {
		case s.obj[2]:
		case isType && string(k1) == "output":
			return placeOutput
		case string(k1) == "content":
			return placeContent
		}
	case 4:
		if isType && s.obj[2] && !s.obj[3] && string(k1) == "response" && string(s.key[2]) == "output" {
			return placeResponse
		}
	}
	return placeNone
}

// value takes a whole value kept (isType: a type's, else a name's).
func (t *toolScan) value(isType bool) {
	switch t.place {
	case placeEvent:
		switch string(t.buf) {
		case "response.output_item.added":
			t.event = eventItemAdded
		case "response.output_item.done":
			t.event = eventItemDone
		default:
			t.event = eventOther
		}
	case placeItem:
		switch t.event {
		case eventItemAdded:
			t.count(sourceAdded, openaiItemTools[string(t.buf)])
		case eventItemDone:
			t.count(sourceDone, openaiItemTools[string(t.buf)])
		}
	case placeOutput:
		t.count(sourceAnswer, openaiItemTools[string(t.buf)])
	case placeResponse:
		t.count(sourceFinal, openaiItemTools[string(t.buf)])
	case placeBlock, placeContent:
		if isType {
			t.serverBlock = string(t.buf) == "server_tool_use"
			if string(t.buf) == "mcp_tool_use" {
				t.count(sourceBlocks, ToolMCP)
			}
			return
		}
		if t.serverBlock {
			t.count(sourceBlocks, anthropicServerTools[string(t.buf)])
		}
		t.serverBlock = false
	}
}

func (t *toolScan) count(source int, tool ServerTool) {
	if tool != "" {
		t.uses[source][toolIndex(tool)]++
	}
}

// most is each tool's uses as the place that counted the most saw them.
func (t *toolScan) most() ToolUses {
	var u ToolUses
	for _, src := range t.uses {
		for i, n := range src {
			u[i] = max(u[i], n)
		}
	}
	return u
}
