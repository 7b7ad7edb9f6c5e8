package plan

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// The secrets' side of a plan (docs/secrets.md). Root reads the
// placeholder key and the secrets' files (creds.Material) before Build;
// what is drawn from them (each agent's placeholders, a digest of the
// values) reaches Build in units.Options, never the values themselves.

// SecretsPaths are the secrets' material on a host: what deprovision
// --all --purge removes (the operator's secret files are theirs).
var SecretsPaths = []string{spec.SecretsDir, spec.SecretsCACertPath, spec.SecretsCABundlePath}

// GrantedSecrets are the secrets of f granted to agents, in the spec's
// order: what their host's flock-proxy is handed.
func GrantedSecrets(f *spec.Flock, agents []spec.Agent) []spec.Secret {
	var out []spec.Secret
	for _, s := range f.Secrets {
		if slices.ContainsFunc(agents, func(a spec.Agent) bool { return slices.Contains(a.Secrets, s.Name) }) {
			out = append(out, s)
		}
	}
	return out
}

// Placeholders draws each agent's placeholder of each secret it is
// granted, from the secret's value (values: name -> value, secrets.Value)
// and the placeholder key (spec.PlaceholderLabel): the same at every
// provision while neither changes. A secret without a value is left out
// (its unit holds units.PlaceholderUnknown). Pure.
func Placeholders(agents []spec.Agent, key []byte, values map[string][]byte) map[int]map[string]string {
	out := map[int]map[string]string{}
	for _, a := range agents {
		for _, name := range a.Secrets {
			v, ok := values[name]
			if !ok {
				continue
			}
			if out[a.ID] == nil {
				out[a.ID] = map[string]string{}
			}
			out[a.ID][name] = secrets.Placeholder(v, secrets.Stream(key, spec.PlaceholderLabel(a.ID, name)))
		}
	}
	return out
}

// SecretsDigest is HMAC-SHA256, keyed with the placeholder key, of the
// values (name -> value) in name order, hex: it changes when a value
// does and tells nothing of them. flock-proxy.service carries one of the
// secrets' values and one of the model APIs' files (DrawModels). Pure.
func SecretsDigest(key []byte, values map[string][]byte) string {
	mac := hmac.New(sha256.New, key)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		for _, part := range [][]byte{[]byte(name), values[name]} {
			mac.Write(binary.BigEndian.AppendUint64(nil, uint64(len(part))))
			mac.Write(part)
		}
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// DrawSecrets is what units.Options carry of the secrets granted to
// agents (this host's), read through m as root: each agent's
// placeholders and the digest of the values. With create a missing
// placeholder key is made (provision, reconcile); without, there are no
// placeholders until one is (their units hold units.PlaceholderUnknown).
// A secret file that cannot be read is left out: provision refuses it
// before (spec.SecretFileProblems), and elsewhere its agents' units show
// the drift.
func DrawSecrets(ctx context.Context, m creds.Material, f *spec.Flock, agents []spec.Agent, create bool) (map[int]map[string]string, string, error) {
	granted := GrantedSecrets(f, agents)
	if len(granted) == 0 || m == nil {
		return nil, "", nil
	}
	key, err := m.Key(ctx, create)
	if err != nil || key == nil {
		return nil, "", err
	}
	values := map[string][]byte{}
	for _, s := range granted {
		if v, err := secretValue(ctx, m, s); err == nil {
			values[s.Name] = v
		}
	}
	return Placeholders(agents, key, values), SecretsDigest(key, values), nil
}

// DrawModels is the digest flock-proxy.service carries of the model
// APIs' keys and CAs it is handed for agents (this host's) of f, read
// through m as root and keyed with the placeholder key, made with create
// (the key alone: a flock granting no secret has no CA): a rotated key
// is a difference of its unit, which provision hands over. "" without
// model APIs. A file that cannot be read is left out, as in DrawSecrets.
func DrawModels(ctx context.Context, m creds.Material, f *spec.Flock, agents []spec.Agent, create bool) (string, error) {
	cs := gateway.ForFlock(f, agents).Credentials()
	if len(cs) == 0 || m == nil {
		return "", nil
	}
	key, err := m.Key(ctx, create)
	if err != nil || key == nil {
		return "", err
	}
	values, _ := modelValues(ctx, m, cs)
	return SecretsDigest(key, values), nil
}

// modelValues are the model APIs' files cs (credential name, path) read
// through m as root, by credential name: whole, as systemd hands them to
// flock-proxy, which reads a handed-over one alike (gateway.LoadSecrets).
// A file that cannot be read is left out, and the error says which.
func modelValues(ctx context.Context, m creds.Material, cs [][2]string) (map[string][]byte, error) {
	values := map[string][]byte{}
	var errs []error
	for _, c := range cs {
		b, err := m.Secret(ctx, c[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("credential %s (%s): %w", c[0], c[1], err))
			continue
		}
		values[c[0]] = b
	}
	return values, errors.Join(errs...)
}

// secretValue is the value of s's file read through m as flock-proxy
// reads it (secrets.Value): the placeholder has the length of what is
// swapped in, and a hand-over is what the proxy would read at start.
func secretValue(ctx context.Context, m creds.Material, s spec.Secret) ([]byte, error) {
	b, err := m.Secret(ctx, s.File)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", s.Name, err)
	}
	v, err := secrets.Value(b)
	if err != nil {
		return nil, fmt.Errorf("secret %s (%s): %w", s.Name, s.File, err)
	}
	return v, nil
}

// proxySecrets are what flock-proxy.service is handed for the secrets of
// the agents: each granted secret's file and the CA, with digest; and
// the model APIs' digest (uo's).
func proxySecrets(f *spec.Flock, agents []spec.Agent, uo units.Options) units.ProxySecrets {
	granted := GrantedSecrets(f, agents)
	if len(granted) == 0 {
		return units.ProxySecrets{ModelsDigest: uo.ModelsDigest}
	}
	ps := units.ProxySecrets{Digest: uo.SecretsDigest, ModelsDigest: uo.ModelsDigest}
	for _, s := range granted {
		ps.Creds = append(ps.Creds, [2]string{spec.SecretCredential(s.Name), s.File})
	}
	ps.Creds = append(ps.Creds, [2]string{spec.SecretsCACredential, spec.SecretsCAPath})
	return ps
}

// proxyConfig is flock-proxy's config for here (this host's part of a
// flock): proxy.ConfigFor, and each agent's placeholders by uid.
func proxyConfig(here *spec.Flock, placeholders map[int]map[string]string) proxy.Config {
	pc := proxy.ConfigFor(here)
	for _, a := range here.Agents {
		if ps, ok := placeholders[a.ID]; ok && a.HasSecrets() {
			if pc.Placeholders == nil {
				pc.Placeholders = map[uint32]map[string]string{}
			}
			pc.Placeholders[here.UID(a.ID)] = ps
		}
	}
	return pc
}

// materialWhy says what is wrong with the material, path by path.
func materialWhy(problems map[string]string) string {
	var parts []string
	for _, p := range sortedKeys(problems) {
		parts = append(parts, p+" "+problems[p])
	}
	return strings.Join(parts, "; ")
}
