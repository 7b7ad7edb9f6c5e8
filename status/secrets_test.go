package status

// Tier: unit.

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// What status shows of an agent's secrets: each granted one with the
// proxy's counts (one sent and refused by its rules, one refused for
// both reasons, one not used yet), a secret no longer granted, and an
// agent whose report the bus does not have; in its JSON too. A refusal
// is the wall working, not a problem of the agent's: the exit code stays.
func TestSecretsOf(t *testing.T) {
	a := spec.Agent{ID: 3, Secrets: []string{"search", "github", "idle"}}
	if got := SecretsOf(a, nil); len(got) != 3 || got[0].Name != "github" || !got[0].Granted || got[0].Reported {
		t.Errorf("with no report: %+v", got)
	}
	r := &wire.ModelReport{Agent: 3, Secrets: map[string]wire.SecretUse{
		"github": {Requests: 12, Refused: map[string]uint64{wire.SecretRefusedRule: 1}},
		"search": {Requests: 4, Refused: map[string]uint64{wire.SecretRefusedRule: 2, wire.SecretRefusedUnbound: 1}},
		"old":    {Requests: 1},
	}}
	got := SecretsOf(a, r)
	if len(got) != 4 || got[0].Name != "github" || got[0].Requests != 12 || got[2].Name != "old" || got[2].Granted || !got[1].Reported || got[1].Requests != 0 {
		t.Fatalf("with a report: %+v", got)
	}
	var b bytes.Buffer
	printSecrets(&b, []Agent{{ID: 1}, {ID: 3, Secrets: got}, {ID: 4, Secrets: SecretsOf(spec.Agent{ID: 4, Secrets: []string{"github"}}, nil)}})
	want := "secrets: agent 3: github 12 sent, 1 refused (secret-rule); idle 0 sent; old 1 sent (no longer granted); search 4 sent, 3 refused (2 secret-rule, 1 secret-unbound-host) (since flock-proxy started)\n" +
		"secrets: agent 4: github (no counts from the proxy yet)\n"
	if b.String() != want {
		t.Errorf("status's lines:\n%q\nwant\n%q", b.String(), want)
	}
	row := Agent{ID: 3, State: "active", SubState: "running", Bus: "connected", Secrets: got}
	if p := row.Problem(); p != "" {
		t.Errorf("an agent whose secret was refused has a problem: %s", p)
	}
	data, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"secrets":[{"name":"github","granted":true,"reported":true,"requests":12,"refused_by_reason":{"secret-rule":1}},`; !strings.Contains(string(data), want) {
		t.Errorf("JSON %s lacks %s", data, want)
	}
}
