package spec

// Tier: unit.

import (
	"fmt"
	"strings"
	"testing"
)

// The totals are per service: each host's bus and proxy hold its own
// agents' connections and tunnels; TASKS is the whole cluster's.
func TestShareTotals(t *testing.T) {
	two := "hosts: [{name: a, address: 10.0.0.1}, {name: b, address: 10.0.0.2}]\n"
	list := func(n int, host, extra string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "  - {id: %d, host: %s%s}\n", i, map[bool]string{true: "a", false: "b"}[i%2 == 0 || host == "a"], extra)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, yaml string
		refused    string // "" accepted
	}{
		{"a thousand agents at the defaults", "agents: {count: 1000, egress: [\"api.example.com:443\"]}\n", ""},
		{"the most agents one bus holds at the defaults", "agents: {count: 7680}\n", ""},
		{"one more", "agents: {count: 7681}\n", "add up to 61448 on this host"},
		{"two hosts hold twice as many", two + "agents:\n" + list(12000, "", ""), ""},
		{"but not on one of them", two + "agents:\n" + list(7681, "a", ""), "add up to 61448 on host a"},
		{"agents without names do not count against the proxy", "agents: {count: 5000}\n", ""},
		{"agents granted a model do: the gateway's connections are in their tunnels", "providers: [{name: ollama, kind: openai, url: \"http://127.0.0.1:11434/v1\"}]\nagents: {count: 3000, models: {ollama: }}\n", "add up to 48000 on this host"},
		{"eight orchestrators fill TASKS exactly at the defaults", "agents: {count: 8, role: orchestrator}\n", ""},
		{"nine do not fit", "agents: {count: 9, role: orchestrator}\n", "add up to 576M (9 orchestrators × 64M), beyond TASKS' 512M"},
		{"a larger store holds more", "bus: {store_max: 2G}\nagents: {count: 16, role: orchestrator}\n", ""},
		{"orchestrators on every host share TASKS", two + "defaults: {role: orchestrator}\nagents:\n" + list(9, "", ""), "add up to 576M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("error %v, want one with %q", err, tc.refused)
			}
		})
	}
}
