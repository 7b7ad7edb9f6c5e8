package gateway

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// The limits a grant may set, by the names the spec and the events use.
const (
	LimitConcurrent = "concurrent"
	LimitRPM        = "requests_per_minute"
	LimitDay        = "tokens_per_day"
	LimitMonth      = "tokens_per_month"
	LimitUSDDay     = "usd_per_day"
	LimitUSDMonth   = "usd_per_month"
	// A task's budget (its worker's task_budget, or its own): for the
	// task's whole life, never reset.
	LimitTaskTokens = "task_tokens"
	LimitTaskUSD    = "task_usd"
)

// key is one agent's use of one provider: what counts and limits are
// kept by. Agent ids, not uids: they outlive a change of uid_base.
type key struct {
	Agent    int
	Provider string
}

// Refusal is a request flock answered itself, over one limit of a grant
// or of a budget the agent is in.
type Refusal struct {
	Agent    int
	Provider string
	// Budget is the budget whose limit it is ("": the grant's); Task,
	// the id of the task whose budget it is (at TaskSeq in the tasks'
	// stream).
	Budget     string
	Task       string
	TaskSeq    uint64
	taskBudget wire.TaskBudget
	Limit      string // LimitConcurrent, ...
	Used, Max  uint64 // for a money limit, in wire.PicoUSD
	// For a limit of tokens or money: what requests under way have
	// reserved, and what the refused one would have (Want 0: refused
	// before its body was read, the limit reached already), of which
	// its output at most (tokens).
	Reserved, Want, WantOutput uint64
	Reset                      time.Time // when the limit lets a request through again (zero: when one under way ends)
	RetryAfter                 time.Duration
}

// Money says whether r's limit is one of dollars.
func (r Refusal) Money() bool {
	return r.Limit == LimitUSDDay || r.Limit == LimitUSDMonth || r.Limit == LimitTaskUSD
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
	if r.Limit == LimitMonth || r.Limit == LimitUSDMonth {
		window = "this month (UTC)"
	}
	amount, spent := func(n uint64) string { return strconv.FormatUint(n, 10) }, "tokens used"
	if r.Money() {
		amount, spent = func(n uint64) string { return wire.PicoUSD(n).String() }, "spent"
	}
	line := fmt.Sprintf("flock proxy: agent %d: over its limit %s=%s of provider %s: %s %s %s", r.Agent, r.Limit, amount(r.Max), r.Provider, amount(r.Used), spent, window)
	switch {
	case r.Budget != "":
		line = fmt.Sprintf("flock proxy: agent %d: over the limit %s=%s of budget %s: %s %s %s by its agents", r.Agent, r.Limit, amount(r.Max), r.Budget, amount(r.Used), spent, window)
	case r.Task != "":
		line = fmt.Sprintf("flock proxy: agent %d: task %s is out of its budget %s=%s: %s %s by its requests", r.Agent, quoted(r.Task), r.Limit, amount(r.Max), amount(r.Used), spent)
	}
	if r.Reserved > 0 {
		line += fmt.Sprintf(", %s reserved by requests under way", amount(r.Reserved))
	}
	if r.Want > 0 {
		left := uint64(0)
		if r.Max > r.Used+r.Reserved {
			left = r.Max - r.Used - r.Reserved
		}
		if r.Money() {
			line += fmt.Sprintf("; this request may cost up to %s (%d tokens of output at most) and %s is left: ask for less output (max_tokens), or retry when requests under way end", amount(r.Want), r.WantOutput, amount(left))
		} else {
			line += fmt.Sprintf("; this request may spend up to %d (%d of output at most, about %d of input) and %d are left: ask for less output (max_tokens), or retry when requests under way end", r.Want, r.WantOutput, r.Want-r.WantOutput, left)
		}
	}
	if r.Task != "" {
		return line + "; a task's budget never resets: its further requests are refused, and its result says it ran out of budget"
	}
	return line + "; resets " + when
}

// limiter keeps what the limits need beyond the counts on disk: the
// requests under way and each grant's last minute of requests, in memory
// (a proxy restart forgets at most a minute), what the requests under
// way have reserved in each scope, and which limits are being refused
// now, so a crossing is reported once, not per request.
type limiter struct {
	mu       sync.Mutex
	inflight map[key]int
	minute   map[key]*ring
	reserved map[scopeID]wire.Spend           // what the requests under way may still spend
	crossed  map[scopeID]map[string]bool      // limits refused since the last request let through
	told     map[scopeID]map[string]time.Time // when each limit's last crossing was told: at most once per crossingEvery
}

// scope is one set of limits of spending a request must fit: its grant's
// (tokens and money), a budget's the agent is in, or its task's.
type scope struct {
	id     scopeID
	limits spec.MoneyLimits
	// task is the budget of a task's scope, for its whole life: used
	// reads its spend (the same, day and month).
	task *taskRef
	// used reads what the scope spent today and this month. The limiter
	// reads it under its lock, so that a request counted meanwhile is
	// seen either in what is used or still in what is reserved (its
	// Record comes before its settle), never in neither.
	used func() (day, month wire.Spend)
}

// scopeID names a scope: a grant's (budget "", task 0), a budget's
// (grant zero: a budget is the same for each of its agents) or a task's
// (by its place in the tasks' stream).
type scopeID struct {
	grant  key
	budget string
	task   uint64
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
		l.inflight, l.minute, l.reserved = map[key]int{}, map[key]*ring{}, map[scopeID]wire.Spend{}
		l.crossed, l.told = map[scopeID]map[string]bool{}, map[scopeID]map[string]time.Time{}
	}
}

// admit says whether a request of k under grant g, in scopes (its
// grant's spending first, then its budgets'), may go now: its grant's
// concurrency and rate, and room left in every scope. If so the caller
// must call done when it ends.
func (l *limiter) admit(k key, g spec.Grant, scopes []scope, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	r := Refusal{Agent: k.Agent, Provider: k.Provider}
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
	grant := scopeID{grant: k}
	switch {
	case g.Concurrent > 0 && l.inflight[k] >= g.Concurrent:
		r.Limit, r.Used, r.Max, r.RetryAfter = LimitConcurrent, uint64(l.inflight[k]), uint64(g.Concurrent), time.Second
		return l.refused(grant, r, now)
	case rg != nil && rg.n >= g.RequestsPerMinute:
		r.Limit, r.Used, r.Max = LimitRPM, uint64(rg.n), uint64(g.RequestsPerMinute)
		r.Reset = rg.at[rg.head].Add(time.Minute)
		return l.refused(grant, r, now)
	}
	if v, ok := l.room(&r, scopes, now); !ok {
		return v
	}
	l.inflight[k]++
	if rg != nil {
		rg.push(now)
	}
	// Let through: a limit refused before is under it again, and the
	// next refusal is a crossing of its own (the spending limits' once a
	// reservation fits: reserve).
	if c := l.crossed[grant]; c != nil {
		delete(c, LimitConcurrent)
		delete(c, LimitRPM)
	}
	return verdict{ok: true}
}

// room says whether every scope has room left (what admit asks): if
// not, the verdict of the first that has none. Called with l.mu held.
func (l *limiter) room(r *Refusal, scopes []scope, now time.Time) (verdict, bool) {
	for _, s := range scopes {
		if !l.fits(r, s, wire.Spend{}, now) {
			return l.refused(s.id, *r, now), false
		}
	}
	return verdict{ok: true}, true
}

// roomIn is room for scopes added after admit (a task's, known once the
// request was let through).
func (l *limiter) roomIn(k key, scopes []scope, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	r := Refusal{Agent: k.Agent, Provider: k.Provider}
	v, _ := l.room(&r, scopes, now)
	return v
}

// limitCheck is one limit of a scope against what is spent, reserved and
// wanted.
type limitCheck struct {
	limit               string
	max, used, reserved uint64
	want                uint64
	reset               time.Time // zero: never (a task's)
}

// fits says whether want fits scope s's limits beside what it spent and
// what is reserved in it (want zero: whether any room is left), and if
// not, fills r.
func (l *limiter) fits(r *Refusal, s scope, want wire.Spend, now time.Time) bool {
	lim := s.limits
	if !lim.Any() && (s.task == nil || !s.task.budget.Any()) {
		return true
	}
	day, month := s.used()
	res := l.reserved[s.id]
	over := func(used, reserved, want, max uint64) bool {
		if want == 0 {
			return used+reserved >= max
		}
		return used+reserved+want > max
	}
	var checks []limitCheck
	if t := s.task; t != nil {
		checks = []limitCheck{
			{LimitTaskTokens, t.budget.Tokens, day.Tokens, res.Tokens, want.Tokens, time.Time{}},
			{LimitTaskUSD, uint64(t.budget.USD), uint64(day.Cost), uint64(res.Cost), uint64(want.Cost), time.Time{}},
		}
	} else {
		tomorrow, nextMonth := dayStart(now).AddDate(0, 0, 1), monthStart(now).AddDate(0, 1, 0)
		checks = []limitCheck{
			{LimitDay, lim.TokensPerDay, day.Tokens, res.Tokens, want.Tokens, tomorrow},
			{LimitMonth, lim.TokensPerMonth, month.Tokens, res.Tokens, want.Tokens, nextMonth},
			{LimitUSDDay, uint64(lim.USDPerDay), uint64(day.Cost), uint64(res.Cost), uint64(want.Cost), tomorrow},
			{LimitUSDMonth, uint64(lim.USDPerMonth), uint64(month.Cost), uint64(res.Cost), uint64(want.Cost), nextMonth},
		}
	}
	for _, c := range checks {
		if c.max > 0 && over(c.used, c.reserved, c.want, c.max) {
			r.Budget, r.Limit, r.Used, r.Max, r.Reset = s.id.budget, c.limit, c.used, c.max, c.reset
			r.Reserved, r.Want = c.reserved, c.want
			if s.task != nil {
				r.Task, r.TaskSeq, r.taskBudget = s.task.id, s.task.seq, s.task.budget
			}
			return false
		}
	}
	return true
}

// reserve holds want (tokens, of which output at most, and money) for a
// request admit let through, in every one of its scopes: requests under
// way together never spend past a limit. settle gives it back when its
// usage is counted.
func (l *limiter) reserve(k key, scopes []scope, want wire.Spend, output uint64, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	r := Refusal{Agent: k.Agent, Provider: k.Provider, WantOutput: output}
	for _, s := range scopes {
		if !l.fits(&r, s, want, now) {
			return l.refused(s.id, r, now)
		}
	}
	for _, s := range scopes {
		res := l.reserved[s.id]
		l.reserved[s.id] = wire.Spend{Tokens: res.Tokens + want.Tokens, Cost: res.Cost + want.Cost}
		delete(l.crossed, s.id)
	}
	return verdict{ok: true}
}

// settle gives back what reserve held in scopes, once the request's
// usage is counted.
func (l *limiter) settle(scopes []scopeID, n wire.Spend) {
	if n == (wire.Spend{}) {
		return // nothing reserved (an endpoint that spends nothing, or refused)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range scopes {
		res := l.reserved[id]
		res.Tokens -= min(n.Tokens, res.Tokens)
		res.Cost -= min(n.Cost, res.Cost)
		if res == (wire.Spend{}) {
			delete(l.reserved, id)
		} else {
			l.reserved[id] = res
		}
	}
}

// refused is the verdict of a refusal r in scope id: whether it is a
// crossing.
func (l *limiter) refused(id scopeID, r Refusal, now time.Time) verdict {
	crossing := false
	if !r.Reset.IsZero() {
		r.RetryAfter = r.Reset.Sub(now)
	}
	c := l.crossed[id]
	if c == nil {
		c = map[string]bool{}
		l.crossed[id] = c
	}
	if !c[r.Limit] {
		c[r.Limit] = true
		told := l.told[id]
		if told == nil {
			told = map[string]time.Time{}
			l.told[id] = told
		}
		if last, ok := told[r.Limit]; !ok || now.Sub(last) >= crossingEvery {
			told[r.Limit], crossing = now, true
		}
	}
	return verdict{ref: r, crossing: crossing}
}

// forget drops what the limiter keeps of scope id (a task's, once it is
// done): its refusals' memory would otherwise grow with every task.
func (l *limiter) forget(id scopeID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.crossed, id)
	delete(l.told, id)
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
