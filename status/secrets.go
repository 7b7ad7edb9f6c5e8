package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// SecretUse is what flock-proxy did with one of an agent's secrets since
// it started (its counts are in the proxy's memory); its JSON keys are a
// contract.
type SecretUse struct {
	Name string `json:"name"`
	// Granted: the spec grants it now (a secret no longer granted keeps
	// its counts until the proxy restarts).
	Granted bool `json:"granted"`
	// Reported: the bus has the proxy's report of the agent (false: none
	// yet, or the bus did not answer; the counts are then zero).
	Reported bool `json:"reported"`
	wire.SecretUse
}

// SecretsOf is agent a's use of each secret it is granted or used, in
// name order, from the proxy's last report r (nil: none).
func SecretsOf(a spec.Agent, r *wire.ModelReport) []SecretUse {
	byName := map[string]*SecretUse{}
	for _, name := range a.Secrets {
		byName[name] = &SecretUse{Name: name, Granted: true, Reported: r != nil}
	}
	if r != nil {
		for name, u := range r.Secrets {
			s := byName[name]
			if s == nil {
				s = &SecretUse{Name: name, Reported: true}
				byName[name] = s
			}
			s.SecretUse = u
		}
	}
	var out []SecretUse
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// printSecrets says below the status table what each agent's secrets
// carried and what was refused: "secrets: agent 3: github 12 sent, 1
// refused (secret-rule) (since flock-proxy started)". A refusal is the
// wall working: it is no problem of the agent's (health.go).
func printSecrets(w io.Writer, rows []Agent) {
	for _, r := range rows {
		var parts []string
		since := ""
		for _, s := range r.Secrets {
			if !s.Reported {
				parts = append(parts, s.Name+" (no counts from the proxy yet)")
				continue
			}
			since = " (since flock-proxy started)"
			p := fmt.Sprintf("%s %d sent", s.Name, s.Requests)
			if !s.Granted {
				p += " (no longer granted)"
			}
			if n := s.RefusedTotal(); n > 0 {
				p += fmt.Sprintf(", %d refused (%s)", n, reasons(s.Refused, n))
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "secrets: agent %d: %s%s\n", r.ID, strings.Join(parts, "; "), since)
		}
	}
}

// reasons names the reasons of total refusals, in wire order, with their
// counts when there are several: "secret-rule", "2 secret-rule, 1
// secret-unbound-host".
func reasons(refused map[string]uint64, total uint64) string {
	var parts []string
	for _, reason := range wire.SecretRefusals {
		switch n := refused[reason]; {
		case n == total:
			return reason
		case n > 0:
			parts = append(parts, fmt.Sprintf("%d %s", n, reason))
		}
	}
	return strings.Join(parts, ", ")
}
