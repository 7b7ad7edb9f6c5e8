package standin

import (
	"encoding/json"
	"net/http"
	"path"
	"strings"
)

// messagesReq is what the stand-in reads of a Messages request.
type messagesReq struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// block is a content block of a message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// blocks reads content that is a string or a list of blocks.
func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	return bs
}

// flat is every text of raw: a string, blocks, or blocks in blocks
// (a tool result's content).
func flat(raw json.RawMessage) string {
	var out []string
	for _, b := range blocks(raw) {
		if b.Text != "" {
			out = append(out, b.Text)
		}
		if len(b.Content) > 0 {
			out = append(out, flat(b.Content))
		}
	}
	return strings.Join(out, " ")
}

// words is the request's input tokens: its words, system and messages.
func (q messagesReq) words() int {
	n := len(strings.Fields(flat(q.System)))
	for _, m := range q.Messages {
		n += len(strings.Fields(flat(m.Content)))
	}
	return max(n, 1)
}

func (q messagesReq) hasTools(names ...string) bool {
	for _, want := range names {
		found := false
		for _, t := range q.Tools {
			found = found || t.Name == want
		}
		if !found {
			return false
		}
	}
	return true
}

// turn is what the scripted model answers: text, or one tool call.
type turn struct {
	text  string
	tool  string         // a tool's name ("" none)
	id    string         // its tool_use id
	input map[string]any // its input
}

// script plays Claude Code's loop: Write the file the first prompt names,
// Bash to read it back, then say what Bash said. A prompt that holds a
// command ("run: <<CMD", its lines, "CMD") has Bash run it instead, then
// says what Bash said.
func (s *Server) script(q messagesReq, sh shape) turn {
	if !q.hasTools("Write", "Bash") || len(q.Messages) == 0 {
		n := sh.words
		if n == 0 {
			n = 5
		}
		return turn{text: text(n)}
	}
	// The newest tool result says where the loop is: Claude Code may put
	// a message of its own (a reminder) after it.
	for i := len(q.Messages) - 1; i >= 0; i-- {
		bs := blocks(q.Messages[i].Content)
		for j := len(bs) - 1; j >= 0; j-- {
			b := bs[j]
			if b.Type != "tool_result" {
				continue
			}
			switch {
			case strings.HasPrefix(b.ToolUseID, "toolu_write"):
				name, _ := s.wanted(q)
				return turn{tool: "Bash", id: s.id("toolu_bash_"), input: map[string]any{
					"command": "cat " + name + " && echo flock-bash-ok", "description": "Read the file back"}}
			case strings.HasPrefix(b.ToolUseID, "toolu_bash"):
				return turn{text: "Done. Bash said: " + strings.TrimSpace(flat(b.Content))}
			}
		}
	}
	if cmd := s.command(q); cmd != "" {
		return turn{tool: "Bash", id: s.id("toolu_bash_"), input: map[string]any{"command": cmd, "description": "Run the task's command"}}
	}
	name, content := s.wanted(q)
	return turn{tool: "Write", id: s.id("toolu_write_"), input: map[string]any{"file_path": name, "content": content + "\n"}}
}

// command is the command the first prompt holds between "run: <<CMD" and
// a line "CMD" ("": none).
func (s *Server) command(q messagesReq) string {
	for _, m := range q.Messages {
		if m.Role == "user" {
			if c := runRe.FindStringSubmatch(flat(m.Content)); c != nil {
				return c[1]
			}
			return ""
		}
	}
	return ""
}

// wanted is the file the first prompt asks for ("write NAME: CONTENT"),
// under the working directory Claude Code's system prompt names.
func (s *Server) wanted(q messagesReq) (string, string) {
	dir := "/tmp"
	all := flat(q.System)
	for _, m := range q.Messages {
		all += " " + flat(m.Content)
	}
	if m := workdirRe.FindStringSubmatch(all); m != nil {
		dir = strings.TrimRight(m[1], ".,;")
	}
	name, content := "result.txt", "hello from the stand-in"
	for _, m := range q.Messages {
		if m.Role != "user" {
			continue
		}
		if w := writeRe.FindStringSubmatch(flat(m.Content)); w != nil {
			name, content = w[1], strings.TrimSpace(w[2])
			break
		}
	}
	if !path.IsAbs(name) {
		name = path.Join(dir, name)
	}
	return name, content
}

// messages answers a Messages request, whole or streamed.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var q messagesReq
	if !readJSON(w, r, &q, anthropicErr) {
		return
	}
	sh := shapeOf(r)
	t := s.script(q, sh)
	in := uint64(q.words())
	// Some of the input as cache reads and writes, as a prompt with
	// cache_control has: the meter must count all four.
	u := Usage{Requests: 1, Input: in, CacheRead: in / 4, CacheWrite: in / 8}
	stop, content := "end_turn", []any{map[string]any{"type": "text", "text": t.text}}
	out := uint64(len(strings.Fields(t.text)))
	if t.tool != "" {
		stop, content = "tool_use", []any{map[string]any{"type": "tool_use", "id": t.id, "name": t.tool, "input": t.input}}
		b, _ := json.Marshal(t.input)
		out = uint64(len(b)/4 + 1)
	}
	out = max(out, 1)
	usage := func(output uint64) map[string]any {
		return map[string]any{"input_tokens": u.Input, "cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite, "output_tokens": output}
	}
	msg := map[string]any{"id": s.id("msg_standin_"), "type": "message", "role": "assistant", "model": q.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil}
	if !q.Stream {
		msg["usage"] = usage(out)
		u.Output = out
		writeJSON(w, msg)
		s.report(sh.tag, u)
		return
	}
	e := newEvents(w, r, sh)
	// What each written event reported goes in the ledger at once: a
	// stream cut after it has reported it.
	defer func() {
		if v := recover(); v != nil {
			s.report(sh.tag, u)
			panic(v)
		}
		s.report(sh.tag, u)
	}()
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"], start["usage"] = []any{}, nil, usage(1)
	e.send("message_start", map[string]any{"type": "message_start", "message": start})
	u.Output = 1
	if t.tool != "" {
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": t.id, "name": t.tool, "input": map[string]any{}}})
		b, _ := json.Marshal(t.input)
		for i := 0; i < len(b); i += 20 {
			e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(b[i:min(i+20, len(b))])}})
		}
	} else {
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		deltas := map[string][]byte{} // each word's event, made once: a long stream as fast as the wire
		for i, word := range strings.Fields(t.text) {
			if i > 0 {
				word = " " + word
			}
			d, ok := deltas[word]
			if !ok {
				d, _ = json.Marshal(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
				deltas[word] = d
			}
			e.send("content_block_delta", d)
		}
	}
	e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	u.Output = out
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
