package gateway

// Tier: unit.

import (
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
func TestGatewayLimits(t *testing.T) {
	clock := time.Date(2026, 3, 31, 23, 59, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", RequestsPerMinute: 3}, "oai": {Provider: "oai", TokensPerDay: 30}}, nil))
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

	// tokens_per_day: the request that crosses it goes through (its
	// tokens are known only after), the next is refused until midnight.
	for i := 0; ; i++ {
		status, h, body := r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiReq)
		if status == 429 {
			msg := errorMessage(t, body)
			if !strings.HasPrefix(msg, "flock proxy: agent 1: over its limit tokens_per_day=30 of provider oai: ") ||
				!strings.HasSuffix(msg, " tokens used today (UTC); resets at 2026-04-02T00:00:00Z (in 23h59m59s)") ||
				h.Get("Retry-After") != strconv.Itoa(24*3600-1) || !strings.Contains(body, `"code":"rate_limit_exceeded"`) {
				t.Errorf("over tokens_per_day: %s (retry-after %s)", body, h.Get("Retry-After"))
			}
			if i != 3 {
				t.Errorf("refused after %d requests of 10 tokens, want 3", i)
			}
			break
		}
		if i > 10 {
			t.Fatal("never refused")
		}
		// The tokens count once the answer is read to its end.
		eventually(t, func() error {
			if _, day := r.g.Store.Window(idA, "oai", now()); day != uint64(10*(i+1)) {
				return errorf("day's tokens %d, want %d", day, 10*(i+1))
			}
			return nil
		})
	}
	for range 3 {
		r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiReq) // refused again: no new event
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
	if status, _, body := r.call(uidA, http.MethodPost, "/oai/chat/completions", openaiReq); status != 200 {
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
		if _, ok, _ := l.admit(k, g, 0, 0, now); !ok {
			t.Fatalf("round %d: the first request refused", i)
		}
		if _, ok, crossing := l.admit(k, g, 0, 0, now); ok {
			t.Fatalf("round %d: a second request at once let through", i)
		} else if crossing {
			told++
		}
		l.done(k)
	}
	if told != 4 { // 200 s of crossings: at 0, 60, 120 and 180 s
		t.Errorf("told %d crossings in 200 s, want 4", told)
	}
}
