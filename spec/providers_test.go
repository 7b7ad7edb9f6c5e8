package spec

// Tier: unit (no root; the owner check runs as root only).

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

func TestProvidersAndGrantsAreRead(t *testing.T) {
	f, err := Parse([]byte(`
providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com/", key_file: /etc/flock/keys/anthropic}
  - {name: corp, kind: openai, url: "https://llm.corp.example:8443/v1", key_file: /etc/flock/keys/corp, ca_file: /etc/flock/corp-ca.pem}
  - {name: ollama, kind: openai, url: "http://127.0.0.1:11434/v1"}
defaults:
  models: {ollama: }
agents:
  - id: 1
    models:
      anthropic: {requests_per_minute: 60, tokens_per_day: 2M, tokens_per_month: 40M, concurrent: 4,
                  server_tools: [web_search, mcp], betas: [mcp-client-2025-11-20]}
      corp: {server_tools: []}
  - id: 2
  - id: 3
    models: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{
		{Name: "anthropic", Kind: "anthropic", URL: "https://api.anthropic.com", KeyFile: "/etc/flock/keys/anthropic"},
		{Name: "corp", Kind: "openai", URL: "https://llm.corp.example:8443/v1", KeyFile: "/etc/flock/keys/corp", CAFile: "/etc/flock/corp-ca.pem"},
		{Name: "ollama", Kind: "openai", URL: "http://127.0.0.1:11434/v1"},
	}
	if !reflect.DeepEqual(f.Providers, want) {
		t.Errorf("providers:\n got %+v\nwant %+v", f.Providers, want)
	}
	a1, _ := f.Agent(1)
	if w := []Grant{{Provider: "anthropic", RequestsPerMinute: 60, TokensPerDay: 2e6, TokensPerMonth: 40e6, Concurrent: 4,
		ServerTools: []ServerTool{modelapi.ToolWebSearch, modelapi.ToolMCP}, Betas: []string{"mcp-client-2025-11-20"}}, {Provider: "corp"}}; !reflect.DeepEqual(a1.Models, w) {
		t.Errorf("agent 1's grants (its own replace the defaults'):\n got %+v\nwant %+v", a1.Models, w)
	}
	a2, _ := f.Agent(2)
	if w := []Grant{{Provider: "ollama"}}; !reflect.DeepEqual(a2.Models, w) || a2.Models[0].Limited() {
		t.Errorf("agent 2's grants (the defaults'): %+v", a2.Models)
	}
	if a3, _ := f.Agent(3); a3.HasModels() {
		t.Errorf("agent 3 gave models: {} and has %+v", a3.Models)
	}
}

func TestProviderURLs(t *testing.T) {
	for _, tc := range []struct{ in, want, problem string }{
		{"https://api.anthropic.com", "https://api.anthropic.com", ""},
		{"https://api.openai.com/v1/", "https://api.openai.com/v1", ""},
		{"https://[2001:db8::1]:8443/v1", "https://[2001:db8::1]:8443/v1", ""},
		{"http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1", ""},
		{"http://[::1]:8000", "http://[::1]:8000", ""},
		{"http://localhost:11434", "http://localhost:11434", ""},
		{"http://192.168.1.5:11434/v1", "", "plain HTTP"},
		{"http://api.example.com", "", "plain HTTP"},
		{"https://0.0.0.0", "", "not one host's address"},
		{"https://api.example.com:0", "", "not 1-65535"},
		{"https://api.example.com#x", "", "query or fragment"},
		{"https://k:s@api.example.com", "", "user or password"},
		{"unix:///run/llm.sock", "", "not a URL"},
		{"", "", "not a URL"},
	} {
		got, problem := ProviderURLProblem(tc.in)
		if got != tc.want || (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("ProviderURLProblem(%q) = %q, %q; want %q, %q", tc.in, got, problem, tc.want, tc.problem)
		}
	}
}

// The files a provider names, as this host has them: what provision
// refuses before it changes anything.
func TestProviderFileProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string { return writeMode(t, dir, name, body, mode) }
	good := write("good", "sk-ant-test\n", 0o600)
	readable := write("readable", "sk-ant-test\n", 0o644)
	empty := write("empty", "", 0o400)
	notPEM := write("ca.txt", "not a certificate", 0o644)
	f := &Flock{Providers: []Provider{
		{Name: "good", KeyFile: good},
		{Name: "missing", KeyFile: filepath.Join(dir, "nope")},
		{Name: "readable", KeyFile: readable},
		{Name: "empty", KeyFile: empty},
		{Name: "dir", KeyFile: dir},
		{Name: "ca", URL: "https://corp.example", CAFile: notPEM},
		{Name: "local"},
		{Name: "not-granted", KeyFile: readable},
	}}
	var agent Agent
	for _, p := range f.Providers[:len(f.Providers)-1] {
		agent.Models = append(agent.Models, Grant{Provider: p.Name})
	}
	errs := f.ProviderFileProblems(FileCheck{Stat: os.Stat, ReadFile: os.ReadFile}, []Agent{agent})
	got := map[string]string{}
	for _, e := range errs {
		got[e.Path] = e.Msg
	}
	want := map[string]string{
		"providers[1].key_file": "no such file or directory; write the provider's API key there",
		"providers[2].key_file": "readable or writable by others (mode 0644)",
		"providers[3].key_file": "is empty",
		"providers[4].key_file": "is not a regular file",
		"providers[5].ca_file":  "holds no PEM certificate",
	}
	if os.Getuid() != 0 {
		// Files the test makes are its user's, which the owner check
		// refuses before the mode.
		want["providers[0].key_file"] = "is owned by uid"
		want["providers[2].key_file"] = "is owned by uid"
		want["providers[3].key_file"] = "is owned by uid"
	}
	for path, w := range want {
		if !strings.Contains(got[path], w) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want exactly %v", got, want)
	}
}

// A worker's task_budget is read; the defaults' applies to the workers
// that call models, and no one else (an orchestrator beside them is not
// refused for it).
func TestTaskBudgetIsRead(t *testing.T) {
	f, err := Parse([]byte(`
providers:
  - {name: local, kind: openai, url: "http://127.0.0.1:11434/v1"}
defaults:
  models: {local: {}}
  task_budget: {usd: 0.5}
agents:
  - id: 1
    role: orchestrator
    exec: ["/usr/bin/node", "o.js"]
  - id: 2
    command: ["/usr/bin/python3", "w.py"]
  - id: 3
    command: ["/usr/bin/python3", "w.py"]
    task_budget: {tokens: 200K, usd: 0.25}
  - id: 4
    command: ["/usr/bin/python3", "w.py"]
    models: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int]wire.TaskBudget{1: {}, 2: {USD: wire.USD / 2}, 3: {Tokens: 200000, USD: wire.USD / 4}, 4: {}} {
		if a, _ := f.Agent(id); a.TaskBudget != want {
			t.Errorf("agent %d's task_budget: %+v, want %+v", id, a.TaskBudget, want)
		}
	}
}

// writeMode writes body to dir/name with exactly mode (the umask aside).
func writeMode(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}
