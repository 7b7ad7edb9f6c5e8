package wire

// Tier: unit.

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A report with an agent's secrets reads back as it was written, and
// one a secret without a name, a reason the proxy does not give, or a
// negative count spoils is refused, naming what is wrong.
func TestModelReportSecrets(t *testing.T) {
	at := time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC)
	r := ModelReport{Agent: 3, At: at, Secrets: map[string]SecretUse{
		"github": {Requests: 12, Refused: map[string]uint64{SecretRefusedRule: 1}},
		"search": {Refused: map[string]uint64{SecretRefusedUnbound: 2, SecretRefusedRule: 3}},
		"idle":   {},
	}}
	b, err := EncodeModelReport(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseModelReport(b)
	if err != nil {
		t.Fatalf("parsing %s: %v", b, err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip: %+v, want %+v", got, r)
	}
	if n := got.Secrets["search"].RefusedTotal(); n != 5 {
		t.Errorf("search refused %d in all, want 5", n)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"no name", `{"agent":3,"secrets":{"":{"requests":1}}}`, "secrets: a secret with no name"},
		{"unknown reason", `{"agent":3,"secrets":{"github":{"requests":1,"refused_by_reason":{"because":1}}}}`,
			`secrets[github].refused_by_reason: reason "because", not one of [secret-rule secret-unbound-host]`},
		{"negative", `{"agent":3,"secrets":{"github":{"requests":-1}}}`, "secrets.requests"},
	} {
		if _, err := ParseModelReport([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
