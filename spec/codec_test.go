package spec

// Tier: unit. The model APIs cross flock-proxy's config file in the
// spec's own shape: what EncodeProviders and EncodeGrants write,
// DecodeProviders and DecodeGrants read back whole, and a spec reads too.

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// Every field set: a field added to Provider or Grant is zero here, and
// fails this test, until the fixture sets it; the round trip then fails
// until the codec carries it.
var (
	fullProvider = Provider{Name: "corp", Kind: "anthropic", URL: "https://llm.corp.example/v1",
		KeyFile: "/etc/flock/keys/corp", CAFile: "/etc/flock/keys/corp-ca.pem",
		Prices: map[string]modelapi.Price{
			// Every field of a price, to the last of the six decimals.
			"corp-large": {Input: 3e6, Output: 15e6, CacheRead: 3e5, CacheWrite: 3_750_000, CacheWriteLong: 6e6},
			"corp-small": {Input: 1, Output: 1_250_001},
			"free":       {},
		}}
	fullGrant = Grant{Provider: "corp", RequestsPerMinute: 60, TokensPerDay: 2_000_000, TokensPerMonth: MaxTokens,
		USDPerDay: 12*wire.USD + 5, USDPerMonth: 300 * wire.USD, Concurrent: 4, ServerTools: []ServerTool{modelapi.ToolWebFetch, modelapi.ToolMCP}, Betas: []string{"mcp-client-2025-11-20"}}
)

func TestModelCodecRoundTrips(t *testing.T) {
	for _, v := range []any{fullProvider, fullGrant} {
		r := reflect.ValueOf(v)
		for i := range r.NumField() {
			if r.Field(i).IsZero() {
				t.Errorf("the fixture's %s.%s is zero; set it, and carry it in the codec", r.Type().Name(), r.Type().Field(i).Name)
			}
		}
	}
	providers := []Provider{fullProvider, {Name: "local", Kind: "openai", URL: "http://127.0.0.1:11434/v1"}}
	grants := []Grant{fullGrant, {Provider: "local"}}
	pb, err := EncodeProviders(providers)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := EncodeGrants(grants)
	if err != nil {
		t.Fatal(err)
	}
	backP, err := DecodeProviders(pb, "providers")
	if err != nil {
		t.Fatalf("%s: %v", pb, err)
	}
	backG, err := DecodeGrants(gb, "models", backP)
	if err != nil {
		t.Fatalf("%s: %v", gb, err)
	}
	if !reflect.DeepEqual(backP, providers) || !reflect.DeepEqual(backG, grants) {
		t.Errorf("read back:\n%+v\n%+v\nwant\n%+v\n%+v", backP, backG, providers, grants)
	}

	// The spec's own shape: every field it accepts is written, and the
	// encoding reads as a spec.
	var ps []map[string]json.RawMessage
	var gs map[string]map[string]json.RawMessage
	if err := json.Unmarshal(pb, &ps); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gb, &gs); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(ps[0])); !reflect.DeepEqual(got, slices.Sorted(slices.Values(providerKeys))) {
		t.Errorf("a provider's keys %v, want the spec's %v", got, providerKeys)
	}
	if got := slices.Sorted(maps.Keys(gs["corp"])); !reflect.DeepEqual(got, slices.Sorted(slices.Values(grantKeys))) {
		t.Errorf("a grant's keys %v, want the spec's %v", got, grantKeys)
	}
	f, err := Parse([]byte(fmt.Sprintf("providers: %s\nagents: [{id: 1, models: %s}]\n", pb, gb)))
	if err != nil {
		t.Fatalf("the encoding is not a spec's: %v\n%s\n%s", err, pb, gb)
	}
	if !reflect.DeepEqual(f.Providers, providers) || !reflect.DeepEqual(f.Agents[0].Models, grants) {
		t.Errorf("the spec read %+v %+v", f.Providers, f.Agents[0].Models)
	}
}

// What the spec refuses, the proxy's config is refused for, in the
// spec's words.
func TestModelCodecRefusesAsTheSpecDoes(t *testing.T) {
	providers := []Provider{fullProvider}
	for _, tc := range []struct {
		name, providers, models, want string
	}{
		{"an unknown kind", `[{"name": "x", "kind": "gopher", "url": "https://x.example"}]`, "", `providers[0].kind: "gopher" is not a provider kind`},
		{"plain HTTP off the host", `[{"name": "x", "kind": "openai", "url": "http://x.example"}]`, "", "providers[0].url: \"http://x.example\" is plain HTTP"},
		{"a key file's path", `[{"name": "x", "kind": "openai", "url": "https://x.example", "key_file": "keys/x"}]`, "", `providers[0].key_file: "keys/x" is not an absolute path`},
		{"a provider not listed", "", `{"other": {}}`, `models.other: "other" is not one of the providers`},
		{"an unknown tool", "", `{"corp": {"server_tools": ["web_search", "time_travel"]}}`, `models.corp.server_tools[1]: "time_travel" is not a server tool`},
		{"a limit out of range", "", `{"corp": {"concurrent": 0}}`, "models.corp.concurrent: 0 is out of range"},
		{"not a mapping", "", `[]`, "models: is a list"},
		{"a price not a number", `[{"name": "x", "kind": "openai", "url": "https://x.example", "prices": {"m": {"input": "one", "output": 2}}}]`, "", `providers[0].prices.m.input: "one" is not a number`},
		{"a price with 7 decimals", `[{"name": "x", "kind": "openai", "url": "https://x.example", "prices": {"m": {"input": 0.0000001, "output": 2}}}]`, "", `providers[0].prices.m.input: "0.0000001" has more than 6 decimals`},
		{"a price without output", `[{"name": "x", "kind": "openai", "url": "https://x.example", "prices": {"m": {"input": 1}}}]`, "", `providers[0].prices.m.output: missing`},
		{"a price's unknown field", `[{"name": "x", "kind": "openai", "url": "https://x.example", "prices": {"m": {"input": 1, "output": 2, "cached": 1}}}]`, "", `providers[0].prices.m: unknown field "cached"`},
		{"prices not a mapping", `[{"name": "x", "kind": "openai", "url": "https://x.example", "prices": [1]}]`, "", `providers[0].prices: is a list`},
	} {
		var err error
		if tc.providers != "" {
			_, err = DecodeProviders([]byte(tc.providers), "providers")
		} else {
			_, err = DecodeGrants([]byte(tc.models), "models", providers)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
