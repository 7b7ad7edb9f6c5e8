package bus

import (
	"fmt"
	"sort"
	"time"
)

// Log lines about one client are rate-limited per user and kind, so an
// agent sending a flood of refused or unreadable messages writes a line a
// minute, not one per message: journald rate-limits flock.service as a
// whole, and a flood would otherwise push every other agent's lines out
// of the journal with its own. What is not written is counted and said
// when the window closes.
const (
	logEvery = time.Minute
	// perUser is how many lines one user may have written per kind and
	// window; unauthenticated clients share one window of perAnonymous.
	perUser      = 1
	perAnonymous = 10
	// anonymous is the limiter's name for clients that did not
	// authenticate (any number of them, one bucket).
	anonymous = ""
	// otherKind is a client's lines that are not violations (a slow
	// consumer, a parser error): limited like them, counted nowhere.
	otherKind = "other"
)

// limitKey is whose lines and of which kind: who is the user's name (or
// anonymous), agent its agent id (0: not an agent).
type limitKey struct {
	who   string
	agent int
	kind  string
}

type window struct {
	start      time.Time
	logged     int
	suppressed int
}

// limiter keeps a window per user and kind; it is not safe for concurrent
// use (the logger holds its lock).
type limiter struct {
	windows map[limitKey]*window
}

func newLimiter() *limiter { return &limiter{windows: map[limitKey]*window{}} }

// heldBack is how many lines of k a closed window held back.
type heldBack struct {
	k limitKey
	n int
}

// String is the summary line; "" if it held none back.
func (h heldBack) String() string { return suppressedLine(h.k, h.n) }

// allow reports whether a line of k may be written at now. summary, if
// it held lines back, is to be written first: the count of the lines the
// closed window held back.
func (l *limiter) allow(k limitKey, now time.Time) (ok bool, summary heldBack) {
	w := l.windows[k]
	if w != nil && now.Sub(w.start) >= logEvery {
		summary = heldBack{k, w.suppressed}
		w = nil
	}
	if w == nil {
		w = &window{start: now}
		l.windows[k] = w
	}
	if w.logged < allowance(k) {
		w.logged++
		return true, summary
	}
	w.suppressed++
	return false, summary
}

// closed ends the windows that are over at now (every window if all),
// and returns the summaries of those that held lines back, in a stable
// order.
func (l *limiter) closed(now time.Time, all bool) []heldBack {
	var out []heldBack
	for k, w := range l.windows {
		if all || now.Sub(w.start) >= logEvery {
			if w.suppressed > 0 {
				out = append(out, heldBack{k, w.suppressed})
			}
			delete(l.windows, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func allowance(k limitKey) int {
	if k.who == anonymous {
		return perAnonymous
	}
	return perUser
}

// suppressedLine says how many lines of k a window held back; "" if none.
func suppressedLine(k limitKey, n int) string {
	if n == 0 {
		return ""
	}
	who := "user " + k.who
	switch {
	case k.agent > 0:
		who = fmt.Sprintf("agent %d", k.agent)
	case k.who == anonymous:
		who = "unauthenticated clients"
	}
	what := "more"
	if k.kind != otherKind {
		what = "more " + k.kind
	}
	return fmt.Sprintf("(%d %s lines like it from %s in the last minute, not logged)", n, what, who)
}
