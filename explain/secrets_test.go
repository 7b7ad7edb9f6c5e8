package explain

// Tier: unit (fakes).

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

const secretsSpec = `secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["api.github.com:443"]
    inject: {header: Authorization, prefix: "Bearer "}
    env: [GH_TOKEN]
    rules:
      allow: [{methods: [GET, POST], path: /repos/acme}]
      deny: [{methods: [DELETE]}]
agents:
  - id: 1
    egress: ["api.github.com:443"]
    secrets: [github]
`

var wantSecrets = []Secret{{Name: "github", File: "/etc/flock/secrets/github", Hosts: []string{"api.github.com:443"},
	Inject: "header Authorization: Bearer <secret>", Env: []string{"GH_TOKEN"}, Allow: []string{"GET,POST /repos/acme"}, Deny: []string{"DELETE /"}}}

// explain ID names an agent's secrets, their hosts, where they go and
// their rules; its unit's placeholder shows as the variable alone, even
// where it drifted.
func TestLiveSecrets(t *testing.T) {
	h := newFakeHostFor(t, secretsSpec)
	h.units.SetProperty(spec.UnitName(1), "Environment", []string{"GH_TOKEN=ghp_DriftedPlaceholder0000000000000000000"})
	r, err := Live(context.Background(), h.sources(), h.d, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Secrets, wantSecrets) {
		t.Errorf("secrets %+v, want %+v", r.Secrets, wantSecrets)
	}
	var out strings.Builder
	r.WriteText(&out)
	text := out.String()
	line := "#   github: file /etc/flock/secrets/github (flock-proxy's alone), hosts api.github.com:443, placeholder in GH_TOKEN, put in by the proxy as header Authorization: Bearer <secret>; allow GET,POST /repos/acme, deny DELETE /\n"
	switch {
	case !strings.Contains(text, line):
		t.Errorf("text lacks %q:\n%s", line, text)
	case strings.Contains(text, "ghp_") || strings.Contains(text, units.PlaceholderUnknown):
		t.Errorf("text shows a placeholder:\n%s", text)
	case !strings.Contains(text, "GH_TOKEN=(placeholder)"):
		t.Errorf("text does not name the variable:\n%s", text)
	}
}

// Explained by one who cannot draw the placeholders (not root): the
// unit's hash and environment are not compared, and the report says so.
func TestLiveSecretsUndrawn(t *testing.T) {
	h := newFakeHostFor(t, secretsSpec)
	drawn := plan.Build(h.d.Flock, plan.Site{}, units.Options{Placeholders: map[int]map[string]string{1: {"github": "ghp_x"}}})
	if err := h.units.Start(context.Background(), drawn.Units[0]); err != nil {
		t.Fatal(err)
	}
	r, err := Live(context.Background(), h.sources(), h.d, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Drift {
		if d.What == "Description" || d.What == "Environment" {
			t.Errorf("drift %+v from placeholders it could not draw", d)
		}
	}
	if !slices.ContainsFunc(r.Unread, func(u string) bool { return strings.Contains(u, "placeholders are root's to draw") }) {
		t.Errorf("unread %q does not say why", r.Unread)
	}
}

// explain -f says the same of the spec alone.
func TestSpecSecrets(t *testing.T) {
	f, err := spec.Parse([]byte(secretsSpec))
	if err != nil {
		t.Fatal(err)
	}
	if got := Spec(f, "1", Kernel{})[0].Secrets; !reflect.DeepEqual(got, wantSecrets) {
		t.Errorf("secrets %+v, want %+v", got, wantSecrets)
	}
	var out strings.Builder
	WriteSpec(&out, f, "1", Kernel{})
	if !strings.Contains(out.String(), "#   github: file /etc/flock/secrets/github") {
		t.Errorf("explain -f lacks the secret:\n%s", out.String())
	}
}
