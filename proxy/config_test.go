package proxy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

func TestConfigRoundTrips(t *testing.T) {
	f, err := spec.Parse([]byte(`agents:
  - id: 1
    egress: ["api.example.com:443", "*.example.org:443", "10.0.0.0/8:8443"]
  - id: 2
    egress: ["10.1.2.3:443"]
  - id: 3
    egress: ["other.example.net:8443"]
`))
	if err != nil {
		t.Fatal(err)
	}
	c := ConfigFor(f)
	if len(c.Policy.Agents) != 2 {
		t.Fatalf("agents %v: want 1 and 3 (2 has no names)", c.Policy.Agents)
	}
	roundTrip(t, c)
	for _, bad := range []string{
		`{"listen": "localhost", "agents": []}`,
		`{"listen": "127.0.0.1:4230", "agents": [{"uid": 5, "id": 1, "egress": ["*:443"]}]}`,
		`{"listen": "127.0.0.1:4230", "agents": [{"uid": 5, "id": 1, "egress": []}, {"uid": 5, "id": 2, "egress": []}]}`,
	} {
		if _, err := DecodeConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// roundTrip encodes c, checks that it decodes to c and encodes to the
// same bytes again, and returns the bytes.
func roundTrip(t *testing.T, c Config) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeConfig(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v\n%s", back, c, b)
	}
	if again, _ := back.Encode(); string(again) != string(b) {
		t.Errorf("encode is not stable:\n%s\n%s", b, again)
	}
	return b
}

// A grant crosses the config file whole, its server tools and betas too,
// in the spec's own shape: the providers: list and each agent's models:
// mapping. The proxy refuses what the spec would, in its words.
func TestConfigCarriesModelsInTheSpecsShape(t *testing.T) {
	f, err := spec.Parse([]byte(`providers:
  - {name: anth, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anth, ca_file: /etc/flock/keys/ca.pem}
  - {name: local, kind: openai, url: "http://127.0.0.1:11434/v1"}
agents:
  - id: 1
    models:
      local: {}
      anth: {requests_per_minute: 60, tokens_per_day: 2M, tokens_per_month: 30M, concurrent: 2, server_tools: [web_fetch, mcp], betas: [mcp-client-2025-11-20]}
    task_budget: {tokens: 300K, usd: 0.75}
  - id: 2
    egress: ["api.example.com:443"]
  - id: 3
    role: orchestrator
    models: {local: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := ConfigFor(f)
	b := roundTrip(t, c)
	back, _ := DecodeConfig(b)
	if g := back.Gateway.Agents[f.UID(1)].Grants["anth"]; !g.Allowed().AllowsTool(modelapi.ToolMCP) || !slices.Contains(g.Betas, "mcp-client-2025-11-20") || g.TokensPerMonth != 30_000_000 {
		t.Errorf("agent 1's grant of anth read back as %+v", g)
	}
	if a1, a3 := back.Gateway.Agents[f.UID(1)], back.Gateway.Agents[f.UID(3)]; !a1.Worker || a1.TaskBudget != (wire.TaskBudget{Tokens: 300000, USD: 3 * wire.USD / 4}) || a3.Worker || a3.TaskBudget.Any() {
		t.Errorf("agent 1 (a worker with a task budget) read back as %+v, agent 3 (an orchestrator) as %+v", a1, a3)
	}
	if bad := strings.Replace(string(b), `"task_budget": "tokens=300000,usd=0.75"`, `"task_budget": "usd=lots"`, 1); bad == string(b) {
		t.Errorf("the config lacks agent 1's task budget:\n%s", b)
	} else if _, err := DecodeConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "agents[0].task_budget") {
		t.Errorf("a task budget the proxy cannot read: %v", err)
	}
	for _, want := range []string{`"providers": [`, `"key_file": "/etc/flock/keys/anth"`, `"models": {`, `"anth": {`, `"server_tools": [`, `"local": {}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the config lacks %s:\n%s", want, b)
		}
	}
	bad := strings.Replace(string(b), `"mcp"`, `"time_travel"`, 1)
	if _, err := DecodeConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), `agents[0].models.anth.server_tools[1]: "time_travel" is not a server tool`) {
		t.Errorf("a tool the spec does not know: %v", err)
	}
	bad = strings.Replace(string(b), `"https://api.anthropic.com"`, `"http://api.anthropic.com"`, 1)
	if _, err := DecodeConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), `providers[0].url: "http://api.anthropic.com" is plain HTTP`) {
		t.Errorf("plain HTTP off the host: %v", err)
	}
}

// One agent's flood of denials logs denyBurst lines a window, the count
// of the rest on the next; another agent's denial and every allowed
// tunnel are logged regardless.
func TestJournalLimitsDenialsPerAgent(t *testing.T) {
	now := time.Unix(1000, 0)
	var lines []map[string]string
	var events []wire.EgressEvent
	j := &Journal{Now: func() time.Time { return now }, Send: func(_ string, f map[string]string) error {
		lines = append(lines, f)
		return nil
	}, Also: func(r Record, held int) { events = append(events, r.Event(held)) }}
	for range 1000 {
		j.Record(Record{Agent: 1, Name: "x.example.com", Port: 443, Reason: ReasonNoRule})
	}
	j.Record(Record{Agent: 2, Name: "y.example.com", Port: 443, Reason: ReasonNoRule})
	j.Record(Record{Agent: 1, Name: "ok.example.com", Port: 443, Reason: ReasonAllowed})
	if len(lines) != denyBurst+2 {
		t.Fatalf("%d lines, want %d", len(lines), denyBurst+2)
	}
	if lines[denyBurst]["AGENT_ID"] != "2" || lines[denyBurst+1]["DECISION"] != "allow" {
		t.Errorf("agent 2's denial or the allowed tunnel missing: %v", lines[denyBurst:])
	}
	now = now.Add(denyWindow)
	j.Record(Record{Agent: 1, Name: "x.example.com", Port: 443, Reason: ReasonNoRule})
	if last := lines[len(lines)-1]; last["SUPPRESSED"] != "990" || last["REASON"] != ReasonNoRule {
		t.Errorf("next window: %v", last)
	}
	// The bus hears what the journal logs, the held-back count included.
	if len(events) != len(lines) {
		t.Errorf("%d events for %d journal lines", len(events), len(lines))
	}
	if last := events[len(events)-1]; last.Suppressed != 990 || last.Decision != "deny" || last.Agent != 1 || last.Name != "x.example.com" {
		t.Errorf("last event %+v", last)
	}
}

func TestRecordMessage(t *testing.T) {
	r := Record{Agent: 3, Name: "api.example.com", Port: 443, Reason: ReasonAllowed, BytesUp: 10, BytesDown: 20, Duration: time.Second}
	r.Addr = public
	if m := r.Message(); !strings.HasPrefix(m, "egress allow agent 3 api.example.com:443 addr 192.0.2.10 reason allowed up 10 down 20 in 1s") {
		t.Errorf("message %q", m)
	}
}

// A config the previous release wrote (an agent's grants as a list) is
// read as the same grants: a proxy restarted onto a new package before
// provision rewrote its config still serves them.
func TestConfigReadsThePreviousReleasesGrants(t *testing.T) {
	const previous = `{"listen":"127.0.0.1:4230","providers":[{"name":"anth","kind":"anthropic","url":"https://api.anthropic.com","key_file":"/etc/flock/keys/anth"}],
"agents":[{"uid":2000000001,"id":1,"egress":[],"models":[{"provider":"anth","tokens_per_day":400,"server_tools":["web_search"],"betas":["mcp-client-2025-11-20"]}]}]}`
	c, err := DecodeConfig([]byte(previous))
	if err != nil {
		t.Fatal(err)
	}
	want := spec.Grant{Provider: "anth", TokensPerDay: 400, ServerTools: []spec.ServerTool{modelapi.ToolWebSearch}, Betas: []string{"mcp-client-2025-11-20"}}
	if g := c.Gateway.Agents[2000000001].Grants["anth"]; !reflect.DeepEqual(g, want) {
		t.Errorf("the previous release's grant read as %+v, want %+v", g, want)
	}
	if _, err := DecodeConfig([]byte(strings.Replace(previous, `"provider":"anth",`, "", 1))); err == nil {
		t.Error("a listed grant without its provider was read")
	}
}
