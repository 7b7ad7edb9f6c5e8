package plan

// Tier: unit (fakes).

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

const secretsSpec = `secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["api.github.com:443"]
    env: [GH_TOKEN]
agents:
  - id: 1
    egress: ["api.github.com:443"]
    secrets: [github]
  - id: 2
    egress: ["api.github.com:443"]
`

// provisionSecrets is provision as flockctl runs it with secrets: the
// placeholders and digests drawn through the material first.
func provisionSecrets(t *testing.T, h Host, f *spec.Flock) Plan {
	t.Helper()
	return provisionSecretsWith(t, h, f, units.Options{})
}

func provisionSecretsWith(t *testing.T, h Host, f *spec.Flock, uo units.Options) Plan {
	t.Helper()
	ctx := context.Background()
	var err error
	if uo.Placeholders, uo.SecretsDigest, err = DrawSecrets(ctx, h.Secrets, f, f.Agents, true); err != nil {
		t.Fatal(err)
	}
	if uo.ModelsDigest, err = DrawModels(ctx, h.Secrets, f, f.Agents, true); err != nil {
		t.Fatal(err)
	}
	return provisionWith(t, h, f, Site{}, uo)
}

func restarted(p Plan) int { return p.Count(StartUnit) + p.Count(RestartUnit) + p.Count(StopUnit) }

// A flock granted a secret: the material made once, the proxy handed the
// secret's file and the CA, the agent its placeholder and the bundle.
// A new secret of the same shape is handed to the proxy; material
// deleted by hand is made again (a new CA restarts the proxy); a flock
// without grants gets none of it.
func TestSecretsFollowTheirFiles(t *testing.T) {
	ctx := context.Background()
	h, fk := newFakes()
	f := mustParse(t, secretsSpec)
	fk.secrets.Secrets["/etc/flock/secrets/github"] = []byte("ghp_16C7e42F292c6912E7710c838347Ae178B4a\n")

	p := provisionSecrets(t, h, f)
	if p.Count(EnsureSecrets) != 1 || fk.secrets.Ensured != 1 {
		t.Fatalf("first provision: %s; want the material made once", p)
	}
	st, _ := fk.units.Service(ctx, units.ProxyUnit)
	for _, want := range []string{"LoadCredential=secret-github:/etc/flock/secrets/github\n", "LoadCredential=secrets-ca:" + spec.SecretsCAPath + "\n", "# secrets "} {
		if !strings.Contains(string(st.File), want) {
			t.Errorf("flock-proxy.service lacks %q:\n%s", want, st.File)
		}
	}
	if bytes.Contains(st.File, []byte("ghp_16C7")) {
		t.Errorf("flock-proxy.service holds the secret:\n%s", st.File)
	}
	env := func(id int) string {
		props, _ := fk.units.Properties(ctx, spec.UnitName(id))
		e, _ := props["Environment"].([]string)
		return strings.Join(e, " ")
	}
	one := env(1)
	if !strings.Contains(one, "GH_TOKEN=ghp_") || strings.Contains(one, "ghp_16C7e42F292c6912E7710c838347Ae178B4a") || !strings.Contains(one, "SSL_CERT_FILE="+spec.SecretsCABundlePath) {
		t.Errorf("agent 1's unit: want its placeholder and the bundle, never the secret:\n%s", one)
	}
	if two := env(2); strings.Contains(two, "GH_TOKEN") || strings.Contains(two, "SSL_CERT_FILE") {
		t.Errorf("agent 2, granted nothing, holds a placeholder or the bundle:\n%s", two)
	}
	if p := provisionSecrets(t, h, f); !p.Empty() {
		t.Fatalf("second provision: %s; want nothing", p)
	}

	// Rotated: a new token of the same shape.
	fk.secrets.Secrets["/etc/flock/secrets/github"] = []byte("ghp_99C7e42F292c6912E7710c838347Ae178B4b\n")
	p = provisionSecrets(t, h, f)
	if p.Count(HandOverProxy) != 1 || p.Count(StartProxy) != 0 || restarted(p) != 0 || !strings.Contains(p.String(), "a secret's file changed") {
		t.Errorf("a rotated secret: %s; want it handed over, nothing restarted", p)
	}

	fk.secrets.Break(spec.SecretsCABundlePath)
	if p := provisionSecrets(t, h, f); p.Count(EnsureSecrets) != 1 || p.Count(StartProxy) != 0 || restarted(p) != 0 {
		t.Errorf("a deleted bundle: %s; want it made again, nothing restarted", p)
	}
	fk.secrets.Break(spec.SecretsCAPath)
	if p := provisionSecrets(t, h, f); p.Count(EnsureSecrets) != 1 || p.Count(StartProxy) != 1 || restarted(p) != 0 {
		t.Errorf("a deleted CA: %s; want it made again and the proxy restarted, no agent", p)
	}

	// Without grants: no material, no credentials; agent 1 restarts
	// without its placeholder.
	none := mustParse(t, strings.Replace(secretsSpec, "    secrets: [github]\n", "", 1))
	fk.secrets.Break(spec.SecretsCAPath)
	p = provisionSecrets(t, h, none)
	st, _ = fk.units.Service(ctx, units.ProxyUnit)
	if p.Count(EnsureSecrets) != 0 || strings.Contains(string(st.File), "secret") || strings.Contains(env(1), "GH_TOKEN") {
		t.Errorf("no grants: %s\n%s", p, st.File)
	}
}

// Placeholders: the same for the same key and value, one per agent,
// shaped as the secret; the digest changes with any value and tells the
// keys apart.
func TestPlaceholdersAndDigest(t *testing.T) {
	f := mustParse(t, strings.Replace(secretsSpec, "  - id: 2\n    egress: [\"api.github.com:443\"]\n", "  - id: 2\n    egress: [\"api.github.com:443\"]\n    secrets: [github]\n", 1))
	key, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	v := map[string][]byte{"github": []byte("ghp_16C7e42F292c6912E7710c838347Ae178B4a")}
	a, b := Placeholders(f.Agents, key, v), Placeholders(f.Agents, key, v)
	p1, p2 := a[1]["github"], a[2]["github"]
	switch {
	case p1 != b[1]["github"]:
		t.Error("drawn twice, the placeholders differ")
	case p1 == p2:
		t.Error("two agents hold the same placeholder")
	case len(p1) != len(v["github"]) || !strings.HasPrefix(p1, "ghp_") || p1 == string(v["github"]):
		t.Errorf("placeholder %q is not shaped as the secret", p1)
	}
	if Placeholders(f.Agents, other, v)[1]["github"] == p1 {
		t.Error("another key draws the same placeholder")
	}
	d := SecretsDigest(key, v)
	for name, w := range map[string]map[string][]byte{
		"another value": {"github": []byte("ghp_16C7e42F292c6912E7710c838347Ae178B4b")},
		"another name":  {"gitlab": v["github"]},
		"none":          {},
	} {
		if SecretsDigest(key, w) == d {
			t.Errorf("%s: the same digest", name)
		}
	}
	if SecretsDigest(other, v) == d || strings.Contains(d, "16C7") {
		t.Error("the digest does not depend on the key, or holds the secret")
	}
}

// The proxy's config carries each granted agent's placeholders by uid,
// no one else's.
func TestProxyConfigCarriesPlaceholders(t *testing.T) {
	f := mustParse(t, secretsSpec)
	pc := proxyConfig(f, map[int]map[string]string{1: {"github": "ghp_x"}, 2: {"github": "ghp_y"}})
	if len(pc.Placeholders) != 1 || pc.Placeholders[f.UID(1)]["github"] != "ghp_x" {
		t.Errorf("placeholders %v; want agent 1's alone, by uid", pc.Placeholders)
	}
}

// A rotated secret of the same shape (the system test's pair) keeps its
// placeholder: the agents holding it need no restart.
func TestSameShapeSamePlaceholder(t *testing.T) {
	f := mustParse(t, secretsSpec)
	key := bytes.Repeat([]byte{7}, 32)
	a := Placeholders(f.Agents, key, map[string][]byte{"github": []byte("ghp_R4nd0mT0kenF0rTheH0stS1deTestXyzW9")})
	b := Placeholders(f.Agents, key, map[string][]byte{"github": []byte("ghp_H9re5tP9ctaP4rHgwP8rpM2huEqmxAvyC2")})
	if a[1]["github"] != b[1]["github"] {
		t.Errorf("placeholders %q and %q of secrets of one shape", a[1]["github"], b[1]["github"])
	}
}
