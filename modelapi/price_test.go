package modelapi

// Tier: unit. The shipped prices against worked examples built from the
// providers' published per-token figures: each cost exact to the
// picodollar and to the cent, cache reads and both lifetimes of cache
// writes included, a long-context request priced whole at its tier; the
// most a reservation holds is never less than what the request costs;
// and every entry of prices.json is whole and names its source.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/wire"
)

func TestShippedPricesCostWorkedExamples(t *testing.T) {
	for _, tc := range []struct {
		name, kind, model string
		t                 wire.Tokens
		want              wire.PicoUSD
		cents             string
	}{
		// 2,000×$4 + 1,500×$20 + 40,000×$0.20 + 6,000×$5 (5m) + 4,000×$8 (1h), per million.
		{"Opus 5.5: input, output, cache reads, writes of both lifetimes", "anthropic", "claude-opus-5-5",
			wire.Tokens{InputTokens: 2000, OutputTokens: 1500, CacheReadTokens: 40000, CacheWriteTokens: 10000, CacheWriteLongTokens: 4000},
			108_000_000_000, "$0.11"},
		// A dated id priced by its prefix: 10,000×$3 + 500×$15 + 90,000×$0.30 + 20,000×$3.75.
		{"Sonnet 4.5 by its dated id", "anthropic", "claude-sonnet-4-5-20250929",
			wire.Tokens{InputTokens: 10000, OutputTokens: 500, CacheReadTokens: 90000, CacheWriteTokens: 20000},
			139_500_000_000, "$0.14"},
		// Prompt 90,000 ≤ 100,000: 50,000×$0.10 + 30,000×$0.01 + 10,000×$0.125 + 1,000×$0.50.
		{"Haiku 5.5 below its tier", "anthropic", "claude-haiku-5-5",
			wire.Tokens{InputTokens: 50000, OutputTokens: 1000, CacheReadTokens: 30000, CacheWriteTokens: 10000},
			7_050_000_000, "$0.01"},
		// Prompt 150,000 > 100,000, the whole request at the long tier:
		// 120,000×$0.50 + 20,000×$0.05 + 10,000×$1 (1h) + 2,000×$2.50.
		{"Haiku 5.5 above its tier", "anthropic", "claude-haiku-5-5",
			wire.Tokens{InputTokens: 120000, OutputTokens: 2000, CacheReadTokens: 20000, CacheWriteTokens: 10000, CacheWriteLongTokens: 10000},
			76_000_000_000, "$0.08"},
		// Prompt 272,000 is not above 272,000: 222,000×$2 + 50,000×$0.10 + 10,000×$10.
		{"GPT-6.2 Sol at its threshold", "openai", "gpt-6.2-sol",
			wire.Tokens{InputTokens: 222000, OutputTokens: 10000, CacheReadTokens: 50000},
			549_000_000_000, "$0.55"},
		// Prompt 300,000 > 272,000: 40,000×$4 + 250,000×$0.20 + 10,000×$5 (30m write) + 10,000×$15.
		{"GPT-6.2 Sol past its threshold", "openai", "gpt-6.2-sol",
			wire.Tokens{InputTokens: 40000, OutputTokens: 10000, CacheReadTokens: 250000, CacheWriteTokens: 10000},
			410_000_000_000, "$0.41"},
		// No cache write is charged: 1,000,000×$0.75 + 200,000×$0.075 + 100,000×$4.50.
		{"GPT-5.4 mini", "openai", "gpt-5.4-mini",
			wire.Tokens{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 200_000},
			1_215_000_000_000, "$1.22"},
		// Prompt 250,000 > 200,000: 150,000×$2.50 + 100,000×$0.25 + 8,000×$15 (thinking included).
		{"Gemini 2.5 Pro above 200k", "gemini", "gemini-2.5-pro",
			wire.Tokens{InputTokens: 150000, OutputTokens: 8000, CacheReadTokens: 100000},
			520_000_000_000, "$0.52"},
		// Prompt 200,000 is not above it: 200,000×$2 + 1,000×$12; one more token and all of it is long.
		{"Gemini 3.1 Pro at 200k", "gemini", "gemini-3.1-pro-preview",
			wire.Tokens{InputTokens: 200000, OutputTokens: 1000}, 412_000_000_000, "$0.41"},
		{"Gemini 3.1 Pro past 200k", "gemini", "gemini-3.1-pro-preview-customtools",
			wire.Tokens{InputTokens: 200001, OutputTokens: 1000}, 818_004_000_000, "$0.82"},
	} {
		p, ok := Shipped().Lookup("", tc.kind, tc.model)
		if !ok {
			t.Errorf("%s: %s %s has no price", tc.name, tc.kind, tc.model)
			continue
		}
		got := p.Cost(tc.t)
		cents := (uint64(got) + 5e9) / 1e10 // to the cent, as a bill rounds
		if c := fmt.Sprintf("$%d.%02d", cents/100, cents%100); got != tc.want || c != tc.cents {
			t.Errorf("%s: %d (%s, to the cent %s), want %d (%s)", tc.name, got, got, c, tc.want, tc.cents)
		}
	}
}

// A model id is priced by its longest prefix in the table: a model is
// never priced as the shorter id it extends.
func TestShippedPricesMatchTheLongestPrefix(t *testing.T) {
	for _, tc := range []struct{ kind, model, want string }{
		{"anthropic", "claude-opus-5-5-20260922", "claude-opus-5-5"},
		{"anthropic", "claude-opus-5", "claude-opus-5"},
		{"anthropic", "claude-fable-5-1", "claude-fable-5-1"},
		{"openai", "gpt-5.4-nano-2026-03-17", "gpt-5.4-nano"},
		{"gemini", "gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
		{"gemini", "gemini-2.5-flash-001", "gemini-2.5-flash"},
	} {
		got, _ := Shipped().Lookup("", tc.kind, tc.model)
		want := shipped.shipped[tc.kind].Models[tc.want]
		if want.Input == 0 || got.Input != want.Input || got.CacheRead != want.CacheRead || got.Output != want.Output {
			t.Errorf("%s is priced %+v, want %s's %+v", tc.model, got, tc.want, want)
		}
	}
	if _, ok := Shipped().Lookup("", "openai", "gpt-4-turbo"); ok {
		t.Error("a model the table lacks has a price")
	}
	own := Shipped().With("corp", map[string]Price{"claude-opus-5": {Input: 1, Output: 2}})
	if p, _ := own.Lookup("corp", "anthropic", "claude-opus-5-5"); p.Input != 1 {
		t.Errorf("the operator's price does not come first: %+v", p)
	}
}

// Whatever the split of the same input between fresh tokens, cache reads
// and cache writes of either lifetime, and whatever output up to the
// most, a request costs no more than Most holds for it.
func TestMostIsNeverBelowCost(t *testing.T) {
	for kind, k := range shipped.shipped {
		for id, p := range k.Models {
			for _, input := range []uint64{0, 1, 999, 100_000, 100_001, 200_000, 200_001, 272_000, 272_001, 1_000_000} {
				const output = 4096
				most := p.Most(input, output)
				for _, split := range [][4]uint64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 1}, {1, 1, 1, 0}, {1, 2, 3, 1}, {0, 3, 1, 1}} {
					sum := split[0] + split[1] + split[2]
					if sum == 0 {
						continue
					}
					read, write := input*split[1]/sum, input*split[2]/sum
					long := write * split[3]
					tk := wire.Tokens{InputTokens: input - read - write, CacheReadTokens: read, CacheWriteTokens: write, CacheWriteLongTokens: long}
					for _, out := range []uint64{0, output / 2, output} {
						tk.OutputTokens = out
						if c := p.Cost(tk); c > most {
							t.Errorf("%s %s: %+v costs %d, more than Most(%d, %d) = %d", kind, id, tk, c, input, output, most)
						}
					}
				}
			}
		}
	}
}

// Every entry of prices.json parses, has its input and output (and its
// long tier's), names a kind flock knows, and its kind says where its
// figures come from and when they were read.
func TestPricesFileIsWhole(t *testing.T) {
	var f priceFile
	if err := json.Unmarshal(pricesJSON, &f); err != nil {
		t.Fatal(err)
	}
	if len(f) < 3 {
		t.Fatalf("prices.json prices %d kinds", len(f))
	}
	for kind, k := range f {
		if _, ok := Lookup(kind); !ok {
			t.Errorf("prices.json prices %q, which is not a kind", kind)
		}
		if !strings.HasPrefix(k.Source, "https://") {
			t.Errorf("%s: source %q is not the provider's page", kind, k.Source)
		}
		if _, err := time.Parse(time.DateOnly, k.AsOf); err != nil {
			t.Errorf("%s: as_of %q is not a date: %v", kind, k.AsOf, err)
		}
		if len(k.Models) == 0 {
			t.Errorf("%s prices no model", kind)
		}
		for id, m := range k.Models {
			for _, tier := range []*modelPrice{&m, m.Long} {
				if tier != nil && (tier.Input == "" || tier.Output == "") {
					t.Errorf("%s %s: a tier without input or output: %+v", kind, id, *tier)
				}
			}
			if (m.Long == nil) != (m.Above == 0) {
				t.Errorf("%s %s: a long tier needs the prompt it starts above, and that a long tier", kind, id)
			}
			if _, err := m.price(); err != nil {
				t.Errorf("%s %s: %v", kind, id, err)
			}
		}
	}
}
