package audit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/spec"
)

// ModelKey is a provider's key as the audit looks for it: the file it is
// in and, to look for it in an agent's environment without handing it
// over, its length and its hash with a salt (probe.SecretHash). Key
// itself serves the control alone: it is never in a request an agent
// receives, nor in the report.
type ModelKey struct {
	Provider, File string
	Salt, Hash     string
	Len            int
	Key            string
}

// ReadModelKeys reads the key of every provider of f that has one (as
// root: the files are root's alone), with a fresh salt each.
func ReadModelKeys(f *spec.Flock) ([]ModelKey, error) {
	var out []ModelKey
	for _, p := range f.Providers {
		if p.KeyFile == "" {
			continue
		}
		b, err := os.ReadFile(p.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("provider %s's key: %w", p.Name, err)
		}
		key := strings.TrimSpace(string(b))
		salt := make([]byte, 16)
		rand.Read(salt)
		s := hex.EncodeToString(salt)
		out = append(out, ModelKey{Provider: p.Name, File: p.KeyFile, Salt: s, Hash: probe.SecretHash(s, key), Len: len(key), Key: key})
	}
	return out, nil
}

// modelProbes are agent a's attempts on the model APIs' keys and grants:
// read each key's file, find each key in its environment, and call each
// provider another agent of its host is granted and it is not. The
// controls read the file as root, find the key in an environment that
// holds it, and make the same call as the agent granted it.
func modelProbes(f *spec.Flock, a spec.Agent, keys []ModelKey) []Probe {
	var ps []Probe
	for _, k := range keys {
		read := probe.Request{Op: "read-secret", Path: k.File}
		ps = append(ps, Probe{Name: "read provider " + k.Provider + "'s key file", Category: "models", Req: read, Control: read})
		find := probe.Request{Op: "secret-in-env", Name: k.Salt, Data: k.Hash, Key: k.Len}
		control := find
		control.Env = []string{"FLOCK_AUDIT_CONTROL=" + k.Key}
		ps = append(ps, Probe{Name: "find provider " + k.Provider + "'s key in its environment", Category: "models", Req: find, Control: control})
	}
	granted := map[string]bool{}
	for _, g := range a.Models {
		granted[g.Provider] = true
	}
	for _, p := range f.Providers {
		if granted[p.Name] {
			continue
		}
		for _, b := range f.Agents {
			if b.ID == a.ID || b.Host != a.Host || !grants(b, p.Name) {
				continue
			}
			call := probe.Request{Op: "model-call", Addr: spec.GatewayURL(spec.DefaultProxyListen, p.Name), Name: string(p.Kind)}
			control := call
			control.Key = int(f.UID(b.ID))
			ps = append(ps, Probe{Name: fmt.Sprintf("call provider %s, agent %d's grant", p.Name, b.ID), Category: "models", Req: call, Control: control})
			break
		}
	}
	return ps
}

func grants(a spec.Agent, provider string) bool {
	for _, g := range a.Models {
		if g.Provider == provider {
			return true
		}
	}
	return false
}
