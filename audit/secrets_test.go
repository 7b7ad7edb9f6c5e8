package audit

// Tier: unit.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/spec"
)

// An agent granted a secret tries its file, its value in its environment,
// the CA key and the placeholder key; no request it receives holds the
// secret, every control does what it must not. An agent without the
// grant tries none of it.
func TestSecretProbes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "github")
	if err := os.WriteFile(file, []byte("ghp_secret0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := spec.Parse([]byte(`secrets:
  - {name: github, file: ` + file + `, hosts: ["api.github.com:443"], env: [GH_TOKEN]}
agents:
  - {id: 1, egress: ["api.github.com:443"], secrets: [github]}
  - {id: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := ReadSecrets(f, f.Agents)
	if err != nil || len(ss) != 1 || ss[0].Value != "ghp_secret0123" || ss[0].Hash != probe.SecretHash(ss[0].Salt, "ghp_secret0123") {
		t.Fatalf("secrets %+v, %v", ss, err)
	}
	probes := func(id int) (names []string) {
		a, _ := f.Agent(id)
		for _, p := range Plan(f, a, Target{Secrets: ss}, Colluder{}) {
			if p.Category != "secrets" {
				continue
			}
			names = append(names, p.Name)
			if b, _ := json.Marshal(p.Req); strings.Contains(string(b), "ghp_secret") || len(p.Req.Env) > 0 {
				t.Errorf("agent %d's request %s holds the secret", id, b)
			}
			if p.Req.Op == "secret-in-env" && !slices.Equal(p.Control.Env, []string{"FLOCK_AUDIT_CONTROL=ghp_secret0123"}) {
				t.Errorf("the control of %q looks in %q", p.Name, p.Control.Env)
			}
		}
		return names
	}
	want := []string{"read secret github's file", "find secret github in its environment", "read flock-proxy's CA key", "read the placeholder key"}
	if got := probes(1); !slices.Equal(got, want) {
		t.Errorf("agent 1's probes %q, want %q", got, want)
	}
	if got := probes(2); len(got) != 0 {
		t.Errorf("agent 2, granted nothing, probes %q", got)
	}
}
