package modelapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flockrun/flock/wire"
)

// Price is what a model costs per token, in wire.PicoUSD (its price per
// million tokens in USD, times a million: whole numbers, exact sums).
type Price struct {
	Input, Output, CacheRead, CacheWrite wire.PicoUSD
	// CacheWriteLong is the price of a token written to a cache that
	// lives longer (Anthropic's 1-hour cache); 0: CacheWrite's.
	CacheWriteLong wire.PicoUSD
	// Above, when Long is set, is the prompt (input, cache reads and
	// writes) past which the whole request is priced at Long (a
	// long-context tier, as Gemini 2.5 Pro's above 200,000 tokens).
	Above uint64
	Long  *Price
}

// tier is the price a request of prompt tokens pays.
func (p Price) tier(prompt uint64) Price {
	if p.Long != nil && prompt > p.Above {
		return *p.Long
	}
	return p
}

// Cost is what t cost at p: each kind of token at its price, the whole
// request at its long-context tier if its prompt passed it.
func (p Price) Cost(t wire.Tokens) wire.PicoUSD {
	q := p.tier(t.InputTokens + t.CacheReadTokens + t.CacheWriteTokens)
	long := min(t.CacheWriteLongTokens, t.CacheWriteTokens)
	cwLong := q.CacheWriteLong
	if cwLong == 0 {
		cwLong = q.CacheWrite
	}
	return wire.PicoUSD(t.InputTokens)*q.Input + wire.PicoUSD(t.OutputTokens)*q.Output +
		wire.PicoUSD(t.CacheReadTokens)*q.CacheRead + wire.PicoUSD(t.CacheWriteTokens-long)*q.CacheWrite + wire.PicoUSD(long)*cwLong
}

// Most is the most a request may cost that may send input tokens (an
// estimate) and write output at most: its input at the dearest price an
// input token may have (written to a cache costs more than read fresh),
// at the tier its input reaches. What a reservation holds.
func (p Price) Most(input, output uint64) wire.PicoUSD {
	q := p.tier(input)
	dear := max(q.Input, q.CacheWrite, q.CacheWriteLong, q.CacheRead)
	return wire.PicoUSD(input)*dear + wire.PicoUSD(output)*q.Output
}

// Prices are the models' prices: the table flock ships (prices.json), by
// kind, and the operator's own, by provider, which come first.
type Prices struct {
	shipped  map[string]kindPrices // by kind
	provider map[string]map[string]Price
}

type kindPrices struct {
	Source string           // where the figures come from
	AsOf   string           // and when they were read (2006-01-02)
	Models map[string]Price // by model id, or its prefix
}

// Lookup is the price of model at provider (of kind): the operator's, or
// the table's for the longest model id that is model or a prefix of it
// (claude-sonnet-4-5 prices claude-sonnet-4-5-20250929).
func (ps Prices) Lookup(provider, kind, model string) (Price, bool) {
	if p, ok := longest(ps.provider[provider], model); ok {
		return p, true
	}
	return longest(ps.shipped[kind].Models, model)
}

func longest(m map[string]Price, model string) (Price, bool) {
	best, found := "", false
	for id := range m {
		if strings.HasPrefix(model, id) && (!found || len(id) > len(best)) {
			best, found = id, true
		}
	}
	return m[best], found
}

// Source says where kind's shipped prices come from, and when they were
// read.
func (ps Prices) Source(kind string) (url, asOf string) {
	k := ps.shipped[kind]
	return k.Source, k.AsOf
}

// With is ps with the operator's prices for provider's models.
func (ps Prices) With(provider string, models map[string]Price) Prices {
	out := Prices{shipped: ps.shipped, provider: map[string]map[string]Price{}}
	for p, m := range ps.provider {
		out.provider[p] = m
	}
	out.provider[provider] = models
	return out
}

//go:embed prices.json
var pricesJSON []byte

// Shipped is the table flock ships.
func Shipped() Prices { return shipped }

var shipped = mustPrices(pricesJSON)

// priceFile is prices.json: by kind, its source, the date it was read,
// and each model's prices in USD per million tokens, as decimals.
type priceFile map[string]struct {
	Source string                `json:"source"`
	AsOf   string                `json:"as_of"`
	Models map[string]modelPrice `json:"models"`
}

type modelPrice struct {
	Input          string      `json:"input"`
	Output         string      `json:"output"`
	CacheRead      string      `json:"cache_read,omitempty"`
	CacheWrite     string      `json:"cache_write,omitempty"`
	CacheWriteLong string      `json:"cache_write_long,omitempty"`
	Above          uint64      `json:"above,omitempty"`
	Long           *modelPrice `json:"long,omitempty"`
}

// PriceKeys are the fields of a model's prices, as the table and the
// spec write them (USD per million tokens).
var PriceKeys = []string{"input", "output", "cache_read", "cache_write", "cache_write_long"}

// ParsePrice reads a model's prices in USD per million tokens ("3",
// "0.30"): what the table and the spec's prices write.
func ParsePrice(input, output, cacheRead, cacheWrite, cacheWriteLong string) (Price, error) {
	var p Price
	for _, f := range []struct {
		name string
		s    string
		dst  *wire.PicoUSD
	}{{"input", input, &p.Input}, {"output", output, &p.Output}, {"cache_read", cacheRead, &p.CacheRead},
		{"cache_write", cacheWrite, &p.CacheWrite}, {"cache_write_long", cacheWriteLong, &p.CacheWriteLong}} {
		if f.s == "" {
			continue
		}
		usd, err := wire.ParseUSD(f.s)
		if err == nil && usd%1e6 != 0 {
			err = fmt.Errorf("%q has more than 6 decimals; a price per million tokens is written to $0.000001", f.s)
		}
		if err != nil {
			return Price{}, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = usd / 1e6 // per million tokens: per token
	}
	return p, nil
}

func (m modelPrice) price() (Price, error) {
	p, err := ParsePrice(m.Input, m.Output, m.CacheRead, m.CacheWrite, m.CacheWriteLong)
	if err != nil || m.Long == nil {
		return p, err
	}
	long, err := m.Long.price()
	p.Above, p.Long = m.Above, &long
	return p, err
}

func mustPrices(b []byte) Prices {
	var f priceFile
	if err := json.Unmarshal(b, &f); err != nil {
		panic(fmt.Sprintf("modelapi: prices.json: %v", err))
	}
	ps := Prices{shipped: map[string]kindPrices{}}
	for kind, k := range f {
		kp := kindPrices{Source: k.Source, AsOf: k.AsOf, Models: map[string]Price{}}
		for id, m := range k.Models {
			p, err := m.price()
			if err != nil {
				panic(fmt.Sprintf("modelapi: prices.json: %s %s: %v", kind, id, err))
			}
			kp.Models[id] = p
		}
		ps.shipped[kind] = kp
	}
	return ps
}
