package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// The model APIs cross flock-proxy's config file in the spec's own shape:
// the providers: list and an agent's models: mapping, written here as
// JSON (which YAML reads) and read back by the walker that reads the
// spec, so the proxy checks them by the spec's rules, in its words.

// EncodeProviders is ps as the spec's providers: list; nil for none.
func EncodeProviders(ps []Provider) (json.RawMessage, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	list := make([]object, len(ps))
	for i, p := range ps {
		list[i] = object{}.with("name", p.Name).with("kind", p.Kind).with("url", p.URL).
			with("key_file", p.KeyFile).with("ca_file", p.CAFile).with("prices", encodePrices(p.Prices))
	}
	return json.Marshal(list)
}

// encodePrices is a provider's prices as the spec writes them: by model
// id, each price in USD per million tokens, an exact decimal.
func encodePrices(ps map[string]modelapi.Price) object {
	usd := func(perToken wire.PicoUSD) json.Number { return json.Number((perToken * 1e6).Decimal()) }
	var out object
	for _, id := range slices.Sorted(maps.Keys(ps)) {
		p := ps[id]
		// Input and output are always written (a model may be free), the
		// cache's prices when they are not zero.
		m := object{{"input", usd(p.Input)}, {"output", usd(p.Output)}}
		for _, c := range []member{{"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}, {"cache_write_long", p.CacheWriteLong}} {
			if v := c.value.(wire.PicoUSD); v != 0 {
				m = append(m, member{c.key, usd(v)})
			}
		}
		out = append(out, member{id, m})
	}
	return out
}

// EncodeGrants is gs as an agent's models: mapping, in their order (the
// first grant of a kind is the one its SDKs' variables point at); nil
// for none.
func EncodeGrants(gs []Grant) (json.RawMessage, error) {
	if len(gs) == 0 {
		return nil, nil
	}
	m := object{}
	for _, g := range gs {
		m = append(m, member{g.Provider, object{}.with("requests_per_minute", g.RequestsPerMinute).
			with("tokens_per_day", g.TokensPerDay).with("tokens_per_month", g.TokensPerMonth).
			with("usd_per_day", g.USDPerDay).with("usd_per_month", g.USDPerMonth).
			with("concurrent", g.Concurrent).with("server_tools", g.ServerTools).with("betas", g.Betas)})
	}
	return json.Marshal(m)
}

// DecodeProviders reads what EncodeProviders wrote (nil for none) as the
// spec reads its providers: list, path naming it in the errors. Unlike the spec's, the
// key files are not checked against the flock's root, which the reader
// (the proxy) is not told.
func DecodeProviders(b []byte, path string) ([]Provider, error) {
	n, err := node(b, path)
	if n == nil {
		return nil, err
	}
	w := &walker{}
	ps := w.providers(n, path, "")
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return ps, nil
}

// DecodeGrants reads what EncodeGrants wrote (nil for none) as the spec
// reads an agent's models: mapping, path naming it in the errors, against providers (what
// DecodeProviders read).
func DecodeGrants(b []byte, path string, providers []Provider) ([]Grant, error) {
	n, err := node(b, path)
	if n == nil {
		return nil, err
	}
	w := &walker{providerKinds: map[string]ProviderKind{}}
	for _, p := range providers {
		w.providerKinds[p.Name] = p.Kind
	}
	gs := w.models(n, path)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return gs, nil
}

// EncodeBudgets is bs as the spec's budgets: list, each naming its
// agents by id (the roles a budget names resolved to its agents: the
// reader knows no roles); nil for none.
func EncodeBudgets(bs []Budget) (json.RawMessage, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	list := make([]object, len(bs))
	for i, b := range bs {
		var agents any = b.Agents
		if b.All {
			agents = "all"
		}
		list[i] = object{}.with("name", b.Name).with("agents", agents).
			with("tokens_per_day", b.Limits.TokensPerDay).with("tokens_per_month", b.Limits.TokensPerMonth).
			with("usd_per_day", b.Limits.USDPerDay).with("usd_per_month", b.Limits.USDPerMonth)
	}
	return json.Marshal(list)
}

// DecodeBudgets reads what EncodeBudgets wrote (nil for none) as the spec
// reads its budgets: list, against the agents ids.
func DecodeBudgets(b []byte, path string, ids []int) ([]Budget, error) {
	n, err := node(b, path)
	if n == nil {
		return nil, err
	}
	agents := make([]Agent, len(ids))
	for i, id := range ids {
		agents[i] = Agent{ID: id}
	}
	w := &walker{}
	bs := w.budgets(n, path, agents)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return bs, nil
}

// node is the YAML node of a value EncodeProviders or EncodeGrants wrote;
// nil for none.
func node(b []byte, path string) (*yaml.Node, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, Errors{{Path: path, Msg: "is empty"}}
	}
	return doc.Content[0], nil
}

// object is a mapping as the spec writes one: keys in the order given.
type object []member

type member struct {
	key   string
	value any
}

// with is o and key: v, unless v is zero (a field left out, as an
// operator would).
func (o object) with(key string, v any) object {
	r := reflect.ValueOf(v)
	if r.IsZero() || r.Kind() == reflect.Slice && r.Len() == 0 {
		return o
	}
	return append(o, member{key, v})
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
