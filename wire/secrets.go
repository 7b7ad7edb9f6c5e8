package wire

import (
	"fmt"
	"maps"
	"slices"
)

// Why flock-proxy refused a request carrying an agent's secret (a 403,
// never sent on): outside the secret's rules, or carrying its
// placeholder toward a host the secret is not bound to. The proxy's
// decisions (REASON=), its reports and /metrics name them so.
const (
	SecretRefusedRule    = "secret-rule"
	SecretRefusedUnbound = "secret-unbound-host"
)

// SecretRefusals are the reasons a SecretUse counts, in order.
var SecretRefusals = []string{SecretRefusedRule, SecretRefusedUnbound}

// SecretUse is what flock-proxy did with one of an agent's secrets since
// it started: the counts live in its memory and start at zero again
// when it restarts.
type SecretUse struct {
	// Requests carried the secret: its placeholder swapped, or the
	// secret injected.
	Requests uint64 `json:"requests"`
	// Refused are the requests refused, by reason (SecretRefusals).
	Refused map[string]uint64 `json:"refused_by_reason,omitempty"`
}

// RefusedTotal is every request refused, whatever the reason.
func (u SecretUse) RefusedTotal() uint64 {
	var n uint64
	for _, c := range u.Refused {
		n += c
	}
	return n
}

// checkSecrets says what is wrong with a report's secrets, naming the
// field: a secret with no name, or a reason the proxy does not give.
func checkSecrets(secrets map[string]SecretUse) error {
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		if name == "" {
			return fmt.Errorf("secrets: a secret with no name; name it as the spec's secrets: does")
		}
		for reason := range secrets[name].Refused {
			if !slices.Contains(SecretRefusals, reason) {
				return fmt.Errorf("secrets[%s].refused_by_reason: reason %q, not one of %v", name, reason, SecretRefusals)
			}
		}
	}
	return nil
}
