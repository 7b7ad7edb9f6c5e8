package units

// Tier: unit (no root).

import (
	"slices"
	"testing"
)

// The SDKs' variables point at the first grant of each kind as the
// agent lists them; every grant has its own URL; no key is anywhere.
func TestModelEnvFollowsTheWrittenOrder(t *testing.T) {
	f := parse(t, `providers:
  - {name: openai, kind: openai, url: "https://api.openai.com/v1", key_file: /etc/flock/keys/openai}
  - {name: local, kind: openai, url: "http://127.0.0.1:11434/v1"}
agents:
  - id: 1
    models: {openai: {}, local: {}}
  - id: 2
    models: {local: {}, openai: {}}
`)
	for id, want := range map[int]string{1: "OPENAI_BASE_URL=http://127.0.0.1:4230/openai", 2: "OPENAI_BASE_URL=http://127.0.0.1:4230/local"} {
		a, _ := f.Agent(id)
		env := modelEnv(f, a)
		if !slices.Contains(env, want) || !slices.Contains(env, "FLOCK_MODEL_URL_LOCAL=http://127.0.0.1:4230/local") ||
			!slices.Contains(env, "FLOCK_MODEL_URL_OPENAI=http://127.0.0.1:4230/openai") || !slices.Contains(env, "OPENAI_API_KEY="+ModelKeyPlaceholder) {
			t.Errorf("agent %d: %q, want %s", id, env, want)
		}
	}
}
