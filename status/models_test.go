package status

// Tier: unit.

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// What status and usage show of an agent's model APIs: its grants with
// their limits, the proxy's counts of the day and month that are now's
// (yesterday's are not today's), a provider no longer granted, and the
// provider-side tools it ran, beside its tokens.
func TestModelsOf(t *testing.T) {
	now := time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC)
	a := spec.Agent{ID: 3, Models: []spec.Grant{{Provider: "anthropic", TokensPerDay: 2e6}, {Provider: "ollama"}}}
	if got := ModelsOf(a, nil, now); len(got) != 2 || got[0].Reported || got[0].Limits.TokensPerDay != 2e6 || !got[1].Granted {
		t.Errorf("with no report: %+v", got)
	}
	r := &wire.ModelReport{Agent: 3, Usage: map[string]wire.ModelUsage{
		"anthropic": {Requests: 10, Tokens: wire.Tokens{InputTokens: 500}, Day: "2026-04-02", DayRequests: 2, DayTokens: 1.2e6, Month: "2026-04", MonthTokens: 1.5e6,
			Refused: map[string]uint64{"tokens_per_day": 2}, ServerToolUses: map[string]uint64{"web_search": 3, "web_fetch": 1}},
		"old": {Requests: 1, Day: "2026-04-01", DayRequests: 1, DayTokens: 9, Month: "2026-04", MonthRequests: 1, MonthTokens: 9},
	}}
	got := ModelsOf(a, r, now)
	if len(got) != 3 || got[0].Provider != "anthropic" || got[0].TodayTokens != 1.2e6 || got[0].MonthTokens != 1.5e6 || got[0].Requests != 10 ||
		got[0].ServerToolUses["web_search"] != 3 {
		t.Fatalf("with a report: %+v", got)
	}
	if o := got[1]; o.Provider != "old" || o.Granted || o.TodayTokens != 0 || o.MonthTokens != 9 {
		t.Errorf("a provider no longer granted, used yesterday: %+v", o)
	}
	if !got[2].Reported || got[2].Requests != 0 {
		t.Errorf("a grant not used yet: %+v", got[2])
	}
	var b bytes.Buffer
	printModels(&b, []Agent{{ID: 3, Models: got}})
	if want := "models: agent 3: anthropic 1.20M tokens today (60% of 2.00M), refused tokens_per_day: 2; old 0 tokens today; ollama 0 tokens today (flockctl usage 3)\n"; b.String() != want {
		t.Errorf("status's line:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	for i := range got {
		got[i].Agent = 3
	}
	WriteUsage(&b, Usage{Models: got})
	for _, want := range []string{"anthropic", "1.20M tokens, 2 req (60% of 2.00M)", "tokens_per_day=2.00M", "old (no longer granted)", "tokens_per_day: 2",
		"500/0/0 + web_fetch: 1, web_search: 3"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage's table lacks %q:\n%s", want, b.String())
		}
	}
}
