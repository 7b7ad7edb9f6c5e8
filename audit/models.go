package audit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/modelapi"
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
		salt, hash := lookFor(key)
		out = append(out, ModelKey{Provider: p.Name, File: p.KeyFile, Salt: salt, Hash: hash, Len: len(key), Key: key})
	}
	return out, nil
}

// lookFor is how a probe is told of secret without being handed it: a
// fresh salt, and the secret's hash with it (probe.SecretHash).
func lookFor(secret string) (salt, hash string) {
	b := make([]byte, 16)
	rand.Read(b)
	salt = hex.EncodeToString(b)
	return salt, probe.SecretHash(salt, secret)
}

// modelProbes are agent a's attempts on the model APIs' keys and grants:
// read each key's file, find each key in its environment, and call each
// provider another agent of its host is granted and it is not. The
// controls read the file as root, find the key in an environment that
// holds it, and make the same call as the agent granted it.
func modelProbes(f *spec.Flock, a spec.Agent, keys []ModelKey) []Probe {
	var ps []Probe
	for _, k := range keys {
		ps = append(ps, findSecret("read provider "+k.Provider+"'s key file", "find provider "+k.Provider+"'s key in its environment", k.File, k.Salt, k.Hash, k.Len, k.Key, "models")...)
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
			kind, ok := modelapi.Lookup(string(p.Kind))
			if !ok {
				break
			}
			call := probe.Request{Op: "model-call", Addr: spec.GatewayURL(spec.DefaultProxyListen, p.Name), Path: kind.Probe.List}
			control := call
			control.Key = int(f.UID(b.ID))
			ps = append(ps, Probe{Name: fmt.Sprintf("call provider %s, agent %d's grant", p.Name, b.ID), Category: "models", Req: call, Control: control})
			break
		}
	}
	return ps
}

// gatewayProbes are agent a's attacks on the model gateway, through its
// first grant: a path with dot segments, a provider-side tool that
// reaches the network (Anthropic's web search, OpenAI's web_search_options),
// and more of the largest bodies at once than the gateway holds for one
// agent (let go before their last byte, and bodies it would refuse, so
// nothing reaches the provider).
// The controls make the same call from outside the unit as the agent's
// uid without what is refused: the clean path, no tool, as many bodies
// as one agent may have held. A control's request may reach the provider
// (the audit's model name is no model: a real provider answers 404, and
// nothing is spent).
func gatewayProbes(f *spec.Flock, a spec.Agent) []Probe {
	if len(a.Models) == 0 {
		return nil
	}
	g := a.Models[0]
	p, ok := f.Provider(g.Provider)
	if !ok {
		return nil
	}
	base := spec.GatewayURL(spec.DefaultProxyListen, p.Name)
	uid := int(f.UID(a.ID))
	kind, ok := modelapi.Lookup(string(p.Kind))
	if !ok {
		return nil
	}
	models, send, ask, tool := kind.Probe.List, kind.Probe.Send, kind.Probe.Ask, kind.Probe.Tool
	var ps []Probe
	add := func(name string, req, control probe.Request) {
		control.Key = uid
		ps = append(ps, Probe{Name: name, Category: "models", Req: req, Control: control})
	}
	dots := strings.TrimSuffix(models, "/models") + "/flock-audit/.." + models
	add(fmt.Sprintf("call provider %s by a path with a dot segment", p.Name),
		probe.Request{Op: "model-request", Addr: base, Path: dots},
		probe.Request{Op: "model-request", Addr: base, Path: models})
	add(fmt.Sprintf("ask provider %s for a tool that reaches the network", p.Name),
		probe.Request{Op: "model-request", Addr: base, Path: send, Data: tool},
		probe.Request{Op: "model-request", Addr: base, Path: send, Data: ask})
	part := int(gateway.MaxBufferedPerAgent / gateway.MaxRequestBody)
	burst := probe.Request{Op: "model-burst", Addr: base, Path: send, Size: gateway.MaxRequestBody, Count: part + 1, Alone: true, TimeoutMS: 60_000}
	control := burst
	control.Count, control.Tries = part, 10
	add(fmt.Sprintf("send provider %s more of the largest bodies at once than the gateway holds for it", p.Name), burst, control)
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
