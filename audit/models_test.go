package audit

// Tier: unit.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/spec"
)

// Each agent's plan looks for every provider's key in its file and its
// environment, and calls another agent's grant; no request an agent
// receives holds a key, every control does what the agent must not.
func TestModelProbes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "anthropic")
	if err := os.WriteFile(key, []byte("sk-ant-secret-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := spec.Parse([]byte(`providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: ` + key + `}
  - {name: local, kind: openai, url: "http://127.0.0.1:11434/v1"}
agents:
  - id: 1
    models: {anthropic: {}}
  - id: 2
    models: {local: {}}
  - id: 3
`))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ReadModelKeys(f)
	if err != nil || len(keys) != 1 || keys[0].Key != "sk-ant-secret-0123" || keys[0].Hash != probe.SecretHash(keys[0].Salt, "sk-ant-secret-0123") {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	names := func(id int) []string {
		a, _ := f.Agent(id)
		var out []string
		for _, p := range Plan(f, a, Target{Keys: keys}, Colluder{}) {
			if p.Category != "models" {
				continue
			}
			out = append(out, p.Name)
			b, _ := json.Marshal(p.Req)
			if strings.Contains(string(b), "sk-ant-secret") || len(p.Req.Env) > 0 {
				t.Errorf("agent %d's request %s holds the key", id, b)
			}
			if p.Req.Op == "secret-in-env" && (len(p.Control.Env) != 1 || !strings.HasSuffix(p.Control.Env[0], "=sk-ant-secret-0123")) {
				t.Errorf("the control of %q looks in %q", p.Name, p.Control.Env)
			}
			if strings.HasPrefix(p.Req.Op, "model-") && p.Req.Op != "model-call" && p.Control.Key != int(f.UID(id)) {
				t.Errorf("the control of %q calls as uid %d, not the agent's", p.Name, p.Control.Key)
			}
			if p.Req.Op == "model-call" && p.Control.Key != int(f.UID(2)) && p.Control.Key != int(f.UID(1)) {
				t.Errorf("the control of %q calls as uid %d", p.Name, p.Control.Key)
			}
		}
		return out
	}
	base := []string{"read provider anthropic's key file", "find provider anthropic's key in its environment"}
	// An agent with a grant attacks its gateway through it.
	attacks := func(p string) []string {
		return []string{"call provider " + p + " by a path with a dot segment", "ask provider " + p + " for a tool that reaches the network",
			"send provider " + p + " more of the largest bodies at once than the gateway holds for it"}
	}
	for id, want := range map[int][]string{
		1: append(append(base, "call provider local, agent 2's grant"), attacks("anthropic")...),
		2: append(append(base, "call provider anthropic, agent 1's grant"), attacks("local")...),
		3: append(base, "call provider anthropic, agent 1's grant", "call provider local, agent 2's grant"),
	} {
		if got := names(id); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("agent %d's model probes: %q, want %q", id, got, want)
		}
	}
}
