package gateway

// Tier: unit.

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// Over a limit the agent is answered at once: a 429 in the provider's
// format with retry-after and the line naming the agent, the limit, the
// use and the reset; the crossing is told once, not per request; a new
// limit applies to the next request without anything restarting.
// dayLimit is the tokens_per_day of TestGatewayLimits: room for a few
// of its requests.
const dayLimit = 120

const openaiLimitedReq = `{"model":"gpt-x","max_completion_tokens":5,"messages":[{"role":"user","content":"say three little words please"}]}`

func TestGatewayLimits(t *testing.T) {
	clock := time.Date(2026, 3, 31, 23, 59, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", RequestsPerMinute: 3}, "oai": {Provider: "oai", TokensPerDay: dayLimit}}, nil))
	r.g.Now = now

	// requests_per_minute: three go, the fourth and fifth do not.
	for i := range 5 {
		status, h, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq)
		switch {
		case i < 3 && status != 200:
			t.Fatalf("request %d: %d %s", i, status, body)
		case i >= 3:
			msg := errorMessage(t, body)
			want := "flock proxy: agent 1: over its limit requests_per_minute=3 of provider anth: 3 requests in the last minute; the next is allowed at 2026-04-01T00:00:00Z (in 1m0s)"
			if status != 429 || !strings.Contains(body, `"rate_limit_error"`) || h.Get("Retry-After") != "60" || msg != want {
				t.Errorf("request %d: %d retry-after %q %s\nwant 429 with %q", i, status, h.Get("Retry-After"), body, want)
			}
		}
	}
	advance(61 * time.Second) // a new minute, and a new day and month (UTC)
	if status, _, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Errorf("after the minute: %d %s", status, body)
	}

	// tokens_per_day: each request reserves its most (its input's
	// estimate and its maximum of output) before it goes; the first whose
	// reservation does not fit beside what is used is refused, until
	// midnight, and what is used never passes the limit.
	want := InputEstimate(len(openaiLimitedReq)) + 5
	for i := 0; ; i++ {
		_, month := r.g.Store.Window(idA, "oai", now())
		used := month.Tokens
		status, h, body := r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiLimitedReq)
		if status == 429 {
			msg := errorMessage(t, body)
			line := fmt.Sprintf("flock proxy: agent 1: over its limit tokens_per_day=%d of provider oai: %d tokens used today (UTC); this request may spend up to %d (5 of output at most, about %d of input) and %d are left: ask for less output (max_tokens), or retry when requests under way end; resets at 2026-04-02T00:00:00Z (in 23h59m59s)",
				dayLimit, used, want, want-5, dayLimit-used)
			if msg != line || h.Get("Retry-After") != strconv.Itoa(24*3600-1) || !strings.Contains(body, `"code":"rate_limit_exceeded"`) {
				t.Errorf("over tokens_per_day: %s (retry-after %s)\nwant %s", body, h.Get("Retry-After"), line)
			}
			if used+want <= dayLimit {
				t.Errorf("refused with %d used and %d wanted, under the limit %d", used, want, dayLimit)
			}
			break
		}
		if i > 20 {
			t.Fatal("never refused")
		}
		// The tokens count once the answer is read to its end.
		eventually(t, func() error {
			if _, month := r.g.Store.Window(idA, "oai", now()); month.Tokens <= used || month.Tokens > dayLimit {
				return errorf("day's tokens %d after %d: none counted, or past the limit %d", month.Tokens, used, dayLimit)
			}
			return nil
		})
	}
	for range 3 {
		r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiLimitedReq) // refused again: no new event
	}
	if len(r.crossed) != 2 || r.crossed[0].Limit != LimitRPM || r.crossed[1].Limit != LimitDay {
		t.Errorf("crossings told: %+v, want one of requests_per_minute, one of tokens_per_day", r.crossed)
	}
	if n := r.g.Store.Usage(idA)["oai"].Refused[LimitDay]; n != 4 {
		t.Errorf("refusals counted: %d, want 4", n)
	}

	// A reload with a higher limit lets the next request through.
	pol := r.g.Policy()
	pol.Agents[uidA].Grants["oai"] = spec.Grant{Provider: "oai", TokensPerDay: 1000}
	if err := r.g.SetPolicy(pol, r.secrets); err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiLimitedReq); status != 200 {
		t.Errorf("after raising the limit: %d %s", status, body)
	}
}

// concurrent: a request beyond the limit while the others are under way
// is refused at once; when one ends, the next goes.
func TestGatewayConcurrentLimit(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", Concurrent: 2}}, nil))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Slow streams: 40 words, 25 ms apart, a second each.
			r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicStreamReq, "X-Standin-Words", "40", "X-Standin-Delay", "25ms")
		}()
	}
	eventually(t, func() error {
		r.g.limiter.mu.Lock()
		defer r.g.limiter.mu.Unlock()
		if n := r.g.limiter.inflight[key{idA, "anth"}]; n != 2 {
			return errorf("%d under way", n)
		}
		return nil
	})
	status, h, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq)
	if status != 429 || h.Get("Retry-After") != "1" || !strings.Contains(errorMessage(t, body), "over its limit concurrent=2 of provider anth: 2 requests under way; retry when a request under way ends") {
		t.Errorf("a third at once: %d %s", status, body)
	}
	wg.Wait()
	if status, _, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Errorf("once they ended: %d %s", status, body)
	}
}

// An agent flapping at a limit (under it, over it, under it...) crosses
// it again and again; it is told at most once a minute.
func TestCrossingsAreToldAtMostOnceAMinute(t *testing.T) {
	var l limiter
	k, g := key{1, "anth"}, spec.Grant{Provider: "anth", Concurrent: 1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	told := 0
	for i := range 200 {
		now = now.Add(time.Second)
		if v := l.admit(k, g, nil, now); !v.ok {
			t.Fatalf("round %d: the first request refused", i)
		}
		if v := l.admit(k, g, nil, now); v.ok {
			t.Fatalf("round %d: a second request at once let through", i)
		} else if v.crossing {
			told++
		}
		l.done(k)
	}
	if told != 4 { // 200 s of crossings: at 0, 60, 120 and 180 s
		t.Errorf("told %d crossings in 200 s, want 4", told)
	}
}
