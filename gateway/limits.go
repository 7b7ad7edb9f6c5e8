package gateway

import (
	"fmt"
	"sync"
	"time"

	"github.com/flockrun/flock/spec"
)

// The limits a grant may set, by the names the spec and the events use.
const (
	LimitConcurrent = "concurrent"
	LimitRPM        = "requests_per_minute"
	LimitDay        = "tokens_per_day"
	LimitMonth      = "tokens_per_month"
)

// key is one agent's use of one provider: what counts and limits are
// kept by. Agent ids, not uids: they outlive a change of uid_base.
type key struct {
	Agent    int
	Provider string
}

// Refusal is a request flock answered itself, over one limit of a grant.
type Refusal struct {
	Agent     int
	Provider  string
	Limit     string // LimitConcurrent, ...
	Used, Max uint64
	// For a token limit: what requests under way have reserved, and what
	// the refused one would have (Want 0: refused before its body was
	// read, the limit reached already).
	Reserved, Want, WantOutput uint64
	Reset                      time.Time // when the limit lets a request through again (zero: when one under way ends)
	RetryAfter                 time.Duration
}

// Line is the one line an agent is told, and the event's detail: the
// agent, the limit, the use and when it resets.
func (r Refusal) Line() string {
	when := "when a request under way ends"
	if !r.Reset.IsZero() {
		when = fmt.Sprintf("at %s (in %s)", r.Reset.UTC().Format(time.RFC3339), r.RetryAfter.Round(time.Second))
	}
	switch r.Limit {
	case LimitConcurrent:
		return fmt.Sprintf("flock proxy: agent %d: over its limit concurrent=%d of provider %s: %d requests under way; retry %s", r.Agent, r.Max, r.Provider, r.Used, when)
	case LimitRPM:
		return fmt.Sprintf("flock proxy: agent %d: over its limit requests_per_minute=%d of provider %s: %d requests in the last minute; the next is allowed %s", r.Agent, r.Max, r.Provider, r.Used, when)
	}
	window := "today (UTC)"
	if r.Limit == LimitMonth {
		window = "this month (UTC)"
	}
	line := fmt.Sprintf("flock proxy: agent %d: over its limit %s=%d of provider %s: %d tokens used %s", r.Agent, r.Limit, r.Max, r.Provider, r.Used, window)
	if r.Reserved > 0 {
		line += fmt.Sprintf(", %d reserved by requests under way", r.Reserved)
	}
	if r.Want > 0 {
		left := uint64(0)
		if r.Max > r.Used+r.Reserved {
			left = r.Max - r.Used - r.Reserved
		}
		line += fmt.Sprintf("; this request may spend up to %d (%d of output at most, about %d of input) and %d are left: ask for less output (max_tokens), or retry when requests under way end", r.Want, r.WantOutput, r.Want-r.WantOutput, left)
	}
	return line + "; resets " + when
}

// limiter keeps what the limits need beyond the counts on disk: the
// requests under way and each grant's last minute of requests, in memory
// (a proxy restart forgets at most a minute), and which limits are being
// refused now, so a crossing is reported once, not per request.
type limiter struct {
	mu       sync.Mutex
	inflight map[key]int
	minute   map[key]*ring
	reserved map[key]uint64          // tokens the requests under way may still spend
	crossed  map[key]map[string]bool // limits refused since the last request let through
	// told is when each limit's last crossing was told: an agent that
	// flaps at a limit (concurrent, requests_per_minute) is told at most
	// once per crossingEvery, not at every crossing.
	told map[key]map[string]time.Time
}

// crossingEvery is the least time between two events of one limit of
// one grant.
const crossingEvery = time.Minute

// ring is the start times of the last requests of one grant, at most
// its requests_per_minute of them: exact, not a bucket's average.
type ring struct {
	at   []time.Time
	head int // the oldest
	n    int
}

func (r *ring) drop(before time.Time) {
	for r.n > 0 && !r.at[r.head].After(before) {
		r.head = (r.head + 1) % len(r.at)
		r.n--
	}
}

func (r *ring) push(t time.Time) {
	r.at[(r.head+r.n)%len(r.at)] = t
	r.n++
}

// resized is r with room for size, keeping the newest.
func (r *ring) resized(size int) *ring {
	out := &ring{at: make([]time.Time, size)}
	skip := max(0, r.n-size)
	for i := skip; i < r.n; i++ {
		out.push(r.at[(r.head+i)%len(r.at)])
	}
	return out
}

// verdict is a limit's answer to a request: let through, or refused (ref)
// and whether that is the first refusal of the limit since a request was
// let through, at most once per crossingEvery (crossing: the event).
type verdict struct {
	ref      Refusal
	ok       bool
	crossing bool
}

func (l *limiter) init() {
	if l.inflight == nil {
		l.inflight, l.minute, l.reserved = map[key]int{}, map[key]*ring{}, map[key]uint64{}
		l.crossed, l.told = map[key]map[string]bool{}, map[key]map[string]time.Time{}
	}
}

// window reads the tokens a grant used today and this month. The limiter
// reads it under its lock, so that a request counted meanwhile is seen
// either in what is used or still in what is reserved (its Record comes
// before its settle), never in neither.
type window func() (day, month uint64)

// admit says whether a request of k under grant g may go now, given the
// tokens used (used) and reserved; if so the caller must call done when
// it ends.
func (l *limiter) admit(k key, g spec.Grant, used window, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	day, month := used()
	r := Refusal{Agent: k.Agent, Provider: k.Provider}
	res := l.reserved[k]
	var rg *ring
	if g.RequestsPerMinute > 0 {
		rg = l.minute[k]
		if rg == nil || len(rg.at) != g.RequestsPerMinute {
			if rg == nil {
				rg = &ring{at: make([]time.Time, g.RequestsPerMinute)}
			} else {
				rg = rg.resized(g.RequestsPerMinute)
			}
			l.minute[k] = rg
		}
		rg.drop(now.Add(-time.Minute))
	}
	switch {
	case g.Concurrent > 0 && l.inflight[k] >= g.Concurrent:
		r.Limit, r.Used, r.Max, r.RetryAfter = LimitConcurrent, uint64(l.inflight[k]), uint64(g.Concurrent), time.Second
	case rg != nil && rg.n >= g.RequestsPerMinute:
		r.Limit, r.Used, r.Max = LimitRPM, uint64(rg.n), uint64(g.RequestsPerMinute)
		r.Reset = rg.at[rg.head].Add(time.Minute)
	case !l.tokensFit(&r, g, day, month, res, 0, now):
	default:
		l.inflight[k]++
		if rg != nil {
			rg.push(now)
		}
		// Let through: a limit refused before is under it again, and
		// the next refusal is a crossing of its own (the token limits'
		// once a reservation fits: reserve).
		if c := l.crossed[k]; c != nil {
			delete(c, LimitConcurrent)
			delete(c, LimitRPM)
		}
		return verdict{ok: true}
	}
	return l.refused(k, r, now)
}

// tokensFit says whether want more tokens fit the grant's token limits
// beside what is used and reserved (want 0: whether any room is left),
// and if not, fills r.
func (l *limiter) tokensFit(r *Refusal, g spec.Grant, day, month, reserved, want uint64, now time.Time) bool {
	over := func(used, max uint64) bool {
		if want == 0 {
			return used+reserved >= max
		}
		return used+reserved+want > max
	}
	switch {
	case g.TokensPerDay > 0 && over(day, g.TokensPerDay):
		r.Limit, r.Used, r.Max = LimitDay, day, g.TokensPerDay
		r.Reset = dayStart(now).AddDate(0, 0, 1)
	case g.TokensPerMonth > 0 && over(month, g.TokensPerMonth):
		r.Limit, r.Used, r.Max = LimitMonth, month, g.TokensPerMonth
		r.Reset = monthStart(now).AddDate(0, 1, 0)
	default:
		return true
	}
	r.Reserved, r.Want = reserved, want
	return false
}

// reserve holds want tokens (of which output at most) for a request
// admit let through, against the token limits: requests under way
// together never spend past one. settle gives them back when its usage
// is counted.
func (l *limiter) reserve(k key, g spec.Grant, used window, want, output uint64, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	day, month := used()
	r := Refusal{Agent: k.Agent, Provider: k.Provider, WantOutput: output}
	if l.tokensFit(&r, g, day, month, l.reserved[k], want, now) {
		l.reserved[k] += want
		delete(l.crossed, k)
		return verdict{ok: true}
	}
	return l.refused(k, r, now)
}

// settle gives back what reserve held, once the request's usage is
// counted.
func (l *limiter) settle(k key, n uint64) {
	if n == 0 {
		return // nothing reserved (an endpoint that spends nothing, or refused)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserved[k] -= min(n, l.reserved[k]); l.reserved[k] == 0 {
		delete(l.reserved, k)
	}
}

// refused is the verdict of a refusal r of k: whether it is a crossing.
func (l *limiter) refused(k key, r Refusal, now time.Time) verdict {
	crossing := false
	if !r.Reset.IsZero() {
		r.RetryAfter = r.Reset.Sub(now)
	}
	c := l.crossed[k]
	if c == nil {
		c = map[string]bool{}
		l.crossed[k] = c
	}
	if !c[r.Limit] {
		c[r.Limit] = true
		told := l.told[k]
		if told == nil {
			told = map[string]time.Time{}
			l.told[k] = told
		}
		if last, ok := told[r.Limit]; !ok || now.Sub(last) >= crossingEvery {
			told[r.Limit], crossing = now, true
		}
	}
	return verdict{ref: r, crossing: crossing}
}

// done ends a request admit let through.
func (l *limiter) done(k key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[k]--; l.inflight[k] <= 0 {
		delete(l.inflight, k)
	}
}

func dayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func monthStart(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}
