package plan

// Tier: unit (fakes).

import (
	"context"
	"strings"
	"testing"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

const (
	anthropicFile = "/etc/flock/keys/anthropic"
	anthropicKey  = "sk-ant-0123456789\n"
	// modelsSpec grants agent 1 a model API; agent 2 nothing.
	modelsSpec = `providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}
  - {name: corp, kind: openai, url: "https://llm.corp.example/v1", key_file: /etc/flock/keys/corp, ca_file: /etc/flock/keys/corp-ca.pem}
agents:
  - id: 1
    models: {anthropic: {}}
  - id: 2
`
)

// modelKeyFiles are the fake's model APIs' files, as the operator wrote
// them.
func modelKeyFiles(fk fakes) {
	fk.secrets.Secrets[anthropicFile] = []byte(anthropicKey)
	fk.secrets.Secrets["/etc/flock/keys/corp"] = []byte("corp-0123456789\n")
	fk.secrets.Secrets["/etc/flock/keys/corp-ca.pem"] = []byte("-----BEGIN CERTIFICATE-----\n")
}

// A running proxy whose unit file changes in its model APIs' keys (a
// file rotated, a provider added), with or without its secrets, is
// handed them at a reload: installed, no restart. Anything else changed
// with them restarts it, saying which.
func TestModelKeysHandedOverOrRestarted(t *testing.T) {
	// Agent 1 is granted the secret github and the model API anthropic.
	base := strings.Replace(modelsSpec, "agents:\n", secretsSpec[:strings.Index(secretsSpec, "agents:\n")]+"agents:\n", 1)
	base = strings.Replace(base, "    models: {anthropic: {}}\n", "    models: {anthropic: {}}\n    egress: [\"api.github.com:443\"]\n    secrets: [github]\n", 1)
	runProxyCases(t, base, func(fk fakes) {
		modelKeyFiles(fk)
		fk.secrets.Secrets[githubFile] = []byte(githubToken + "\n")
	}, []proxyCase{
		{"a model API's key file changed", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[anthropicFile] = []byte("sk-ant-9876543210\n")
			return base, units.Options{}
		}, `hand over        flock-proxy.service (a model API's key or CA changed: it takes them at a reload)
install proxy    flock-proxy.service (a model API's key or CA changed)
`},
		{"a model API with a CA added", func(fk fakes) (string, units.Options) {
			return strings.Replace(base, "  - id: 2\n", "  - id: 2\n    models: {corp: {}}\n", 1), units.Options{}
		}, `hand over        flock-proxy.service (a model API is added or removed: it takes them at a reload)
install proxy    flock-proxy.service (a model API is added or removed)
`},
		{"a secret's file and a model API's key changed", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[githubFile] = []byte(rotated + "\n")
			fk.secrets.Secrets[anthropicFile] = []byte("sk-ant-9876543210\n")
			return base, units.Options{}
		}, `hand over        flock-proxy.service (a secret's file changed; a model API's key or CA changed: it takes them at a reload)
install proxy    flock-proxy.service (a secret's file changed; a model API's key or CA changed)
`},
		{"a model API's key file and ExecStart changed", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[anthropicFile] = []byte("sk-ant-9876543210\n")
			return base, units.Options{FlockctlBin: "/opt/flock/flockctl"}
		}, `install proxy    flock-proxy.service (unit file missing, changed or not enabled)
(re)start proxy  flock-proxy.service (a model API's key or CA changed: it reads them at start)
`},
	})
}

// A flock with model APIs and no secrets: the placeholder key is made
// (the digest's), no CA and no bundle; its rotated key is handed over
// whole, as systemd hands the file, at one reload. A flock with neither
// makes nothing, its proxy's unit without a digest.
func TestModelKeysOnlyMakeTheKey(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	modelKeyFiles(fk)
	plain := mustParse(t, "agents:\n  - id: 1\n    egress: [\"api.github.com:443\"]\n")
	provisionSecrets(t, h, plain)
	st, _ := fk.units.Service(ctx, units.ProxyUnit)
	if files := fk.secrets.Files(); len(files) != 0 || strings.Contains(string(st.File), "# models") || strings.Contains(string(st.File), "# secrets") {
		t.Errorf("neither model APIs nor secrets: material %v, unit:\n%s", files, st.File)
	}

	f := mustParse(t, modelsSpec)
	p := provisionSecrets(t, h, f)
	files := fk.secrets.Files()
	if !files[spec.PlaceholderKeyPath] || files[spec.SecretsCAPath] || files[spec.SecretsCABundlePath] || fk.secrets.Ensured != 0 || p.Count(EnsureSecrets) != 0 {
		t.Errorf("model APIs alone: %s; material %v, ensured %d times; want the key alone", p, files, fk.secrets.Ensured)
	}
	st, _ = fk.units.Service(ctx, units.ProxyUnit)
	if !strings.Contains(string(st.File), "\n# models ") || strings.Contains(string(st.File), "# secrets") || strings.Contains(string(st.File), "sk-ant") {
		t.Errorf("model APIs alone, the proxy's unit: want their digest alone, never a key:\n%s", st.File)
	}

	restarts, reloads := fk.units.Restarts(units.ProxyUnit), fk.units.Reloads(units.ProxyUnit)
	fk.secrets.Secrets[anthropicFile] = []byte(" sk-ant-9876543210\n")
	if p := provisionSecrets(t, h, f); p.Count(HandOverProxy) != 1 || restarted(p) != 0 {
		t.Fatalf("a rotated key: %s; want it handed over, nothing restarted", p)
	}
	cred := gateway.KeyCredential("anthropic")
	if got := string(fk.secrets.Taken[cred]); got != " sk-ant-9876543210\n" || fk.units.Restarts(units.ProxyUnit) != restarts || fk.units.Reloads(units.ProxyUnit) != reloads+1 {
		t.Errorf("the proxy took %q, restarted %d times, reloaded %d; want the file whole at one reload", got, fk.units.Restarts(units.ProxyUnit)-restarts, fk.units.Reloads(units.ProxyUnit)-reloads)
	}
	if _, ok := fk.secrets.Taken[gateway.KeyCredential("corp")]; ok {
		t.Error("handed the key of a provider no agent here is granted")
	}
	if p := provisionSecrets(t, h, f); !p.Empty() {
		t.Errorf("provisioned again: %s; want nothing", p)
	}
}
