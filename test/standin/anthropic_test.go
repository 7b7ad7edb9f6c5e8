// Tier: unit. The stand-in's scripted Claude Code loop: a prompt holding
// a command has Bash run it, then the answer says what Bash said.
package standin

import (
	"encoding/json"
	"testing"
)

func TestScriptRunsTheCommandThePromptHolds(t *testing.T) {
	tools := `"tools":[{"name":"Write"},{"name":"Bash"}]`
	for _, tc := range []struct {
		name, req string
		tool, cmd string // the turn's tool and command ("" none)
		text      string
	}{
		{"the command, beside the harness's reminders", `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"run: <<CMD\ncd repo\ngit push -q\nCMD\n"}]}],` + tools + `}`,
			"Bash", "cd repo\ngit push -q", ""},
		{"Bash's output, said back", `{"messages":[{"role":"user","content":"run: <<CMD\ngit push\nCMD"},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_bash_3","content":"pushed\n"}]}],` + tools + `}`,
			"", "", "Done. Bash said: pushed"},
		{"Bash's output, a reminder after it", `{"messages":[{"role":"user","content":"run: <<CMD\ngit push\nCMD"},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_bash_3","content":"pushed"}]},{"role":"user","content":"<system-reminder>x</system-reminder>"}],` + tools + `}`,
			"", "", "Done. Bash said: pushed"},
		{"no command: Write first", `{"messages":[{"role":"user","content":"write a.txt: hi"}],` + tools + `}`,
			"Write", "", ""},
		{"a command not closed is none", `{"messages":[{"role":"user","content":"run: <<CMD\ngit push"}],` + tools + `}`,
			"Write", "", ""},
	} {
		var q messagesReq
		if err := json.Unmarshal([]byte(tc.req), &q); err != nil {
			t.Fatal(err)
		}
		got := (&Server{}).script(q, shape{})
		cmd, _ := got.input["command"].(string)
		if got.tool != tc.tool || cmd != tc.cmd || got.text != tc.text {
			t.Errorf("%s: turn %+v, want tool %q command %q text %q", tc.name, got, tc.tool, tc.cmd, tc.text)
		}
	}
}
