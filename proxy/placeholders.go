package proxy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/flockrun/flock/spec"
)

// maxPlaceholder bounds a placeholder: it has its secret's length, and no
// credential an API reads from a header is longer.
const maxPlaceholder = 4096

// checkPlaceholders checks an agent's grants in the config (secret name
// -> placeholder) as the spec checks its secrets: grants: each names one
// of secrets, whose hosts the agent's egress reaches; each placeholder is
// printable, without spaces (it goes in headers and queries), and its
// own (two alike could not be told apart in a request). path names the
// grants in the errors.
func checkPlaceholders(grants map[string]string, a AgentRules, secrets []spec.Secret, path string) error {
	names := slices.Sorted(maps.Keys(grants))
	b, err := json.Marshal(names)
	if err != nil {
		return err
	}
	if _, err := spec.DecodeSecretGrants(b, path, secrets); err != nil {
		return err
	}
	seen := map[string]string{}
	for _, name := range names {
		p := grants[name]
		if p == "" || len(p) > maxPlaceholder || !printable(p) {
			return fmt.Errorf("%s.%s: the placeholder is empty, longer than %d bytes or not printable ASCII without spaces; provision writes it, so run flockctl provision", path, name, maxPlaceholder)
		}
		if other, dup := seen[p]; dup {
			return fmt.Errorf("%s.%s: the same placeholder as %s; provision writes them, so run flockctl provision", path, name, other)
		}
		seen[p] = name
		s, _ := (&spec.Flock{Secrets: secrets}).Secret(name)
		for _, h := range s.Hosts {
			t, err := ParseTarget(h)
			if err != nil || !nameAllowed(a.Rules, t.Host, t.Port) {
				return fmt.Errorf("%s.%s: secret %s is bound to %s, which agent %d's egress does not allow; add it to agents[id=%d].egress, or remove the grant", path, name, name, h, a.ID, a.ID)
			}
		}
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
