package proxy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
)

const secretsSpec = `secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["api.github.com:443", "github.com:443"]
    inject: {basic: {user: x-access-token}}
    env: [GH_TOKEN]
    rules:
      allow: [{methods: [GET, POST], path: /repos/acme}]
      deny: [{methods: [DELETE]}]
  - name: search
    file: /etc/flock/secrets/search
    hosts: ["api.search.example:443"]
    inject: {query: key}
agents:
  - id: 1
    egress: ["api.github.com:443", "github.com:443", "api.search.example:443"]
    secrets: [github, search]
  - id: 2
    egress: ["api.search.example:443"]
    secrets: [search]
  - id: 3
    egress: ["example.org:443"]
`

// The secrets cross the config in the spec's shape and each agent's
// grants as its placeholders; the proxy refuses what the spec would, and
// a placeholder it could not tell apart or send.
// Unit tier.
func TestConfigCarriesSecretsAndPlaceholders(t *testing.T) {
	f, err := spec.Parse([]byte(secretsSpec))
	if err != nil {
		t.Fatal(err)
	}
	c := ConfigFor(f)
	if !reflect.DeepEqual(c.Secrets, f.Secrets) {
		t.Fatalf("ConfigFor's secrets %+v, want the spec's", c.Secrets)
	}
	c.Placeholders = map[uint32]map[string]string{
		f.UID(1): {"github": "ghp_placeholder1", "search": "key-placeholder1"},
		f.UID(2): {"search": "key-placeholder2"},
	}
	b := roundTrip(t, c)
	for _, want := range []string{`"secrets": [`, `"file": "/etc/flock/secrets/github"`, `"github": "ghp_placeholder1"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the config lacks %s:\n%s", want, b)
		}
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"github": "ghp_placeholder1"`, `"gitlab": "ghp_placeholder1"`, `"gitlab" is not one of the secrets`},
		{`"search": "key-placeholder2"`, `"github": "key-placeholder2"`, "secret github is bound to api.github.com:443, which agent 2's egress does not allow"},
		{`"search": "key-placeholder1"`, `"search": "ghp_placeholder1"`, "the same placeholder as github"},
		{`"search": "key-placeholder2"`, `"search": "key placeholder2"`, "not printable ASCII without spaces"},
		{`"search": "key-placeholder2"`, `"search": ""`, "the placeholder is empty"},
		{`"path": "/repos/acme"`, `"path": "repos"`, `secrets[0].rules.allow[0].path: "repos" does not start with /`},
	} {
		bad := strings.Replace(string(b), tc.from, tc.to, 1)
		if bad == string(b) {
			t.Fatalf("the config lacks %s:\n%s", tc.from, b)
		}
		if _, err := DecodeConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s for %s: %v, want %q", tc.to, tc.from, err, tc.want)
		}
	}
	c.Placeholders[f.UID(9)] = map[string]string{"search": "x"}
	if _, err := c.Encode(); err == nil || !strings.Contains(err.Error(), "no agent of the proxy's") {
		t.Errorf("placeholders of a uid not in the policy: %v", err)
	}
}
