package gateway

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// Store keeps every agent's counts per provider, on disk: a snapshot
// (counts.json, replaced atomically) and a log of the requests since
// (requests.log, one JSON line appended per request, in the order they
// ended). Opening replays the log over the snapshot with the same code
// that counted each request, so a proxy killed at any point comes back
// with every request it had finished; the log is written at once (the
// page cache: a crash of the proxy loses nothing) and synced to disk
// every second (a power cut loses at most that second). Refusals are
// counted in memory and kept at each snapshot. The directory is the
// proxy's own (StateDirectory=, 0700 under /var/lib/private): no agent
// reads or writes it.
type Store struct {
	dir string

	mu       sync.Mutex
	counts   map[key]*wire.ModelUsage
	seq      uint64 // the last request's
	log      *os.File
	unsynced bool
	logged   int          // lines since the snapshot
	changed  map[int]bool // agents whose counts changed since Changed
	// begun are the requests under way (their begin lines), which a
	// compaction writes again into the emptied log.
	begun map[uint64]logLine
	// groups are the budgets' windows, by name, and memberOf the
	// budgets of each agent (SetGroups): counted with each request,
	// under the same lock as its agent's counts.
	groups   map[string]*wire.ModelUsage
	memberOf map[int][]string
	// tasks are the spends of the tasks requests were charged to, by
	// place in the tasks' stream (store_tasks.go).
	tasks map[uint64]*taskCount
}

// Errors of an answer of its own kind, beside the statuses: cut short
// (by the client or the provider), or whole but without a usage.
const (
	ErrorCut     = "cut"
	ErrorNoUsage = "no-usage"
)

// The store's files.
const (
	snapshotFile = "counts.json"
	logFile      = "requests.log"
)

// compactAfter bounds the log: after this many lines the counts are
// written as a snapshot and the log starts again.
const compactAfter = 100000

// Outcome is how one forwarded request ended: what it reported and how.
type Outcome struct {
	At       time.Time
	Usage    modelapi.Usage
	Status   int  // the provider's status (502: flock could not reach it)
	Cut      bool // the answer ended early (the provider or the client went away)
	NoUsage  bool // a whole answer that reported no usage (its usage is estimated)
	Duration time.Duration
	// Cost is what its usage cost at its model's price (0: not priced).
	Cost wire.PicoUSD
	// Begun is what Begin returned for the request (0: none logged).
	Begun uint64
	// Task is the place in the tasks' stream of the task it is charged
	// to (0: none).
	Task uint64
}

// logLine is a request in the log.
type logLine struct {
	Seq      uint64 `json:"seq"`
	At       int64  `json:"at"` // unix nanoseconds
	Agent    int    `json:"agent"`
	Provider string `json:"provider"`
	In       uint64 `json:"in,omitempty"`
	Out      uint64 `json:"out,omitempty"`
	CR       uint64 `json:"cr,omitempty"`
	CW       uint64 `json:"cw,omitempty"`
	// CWL is the part of CW written to the longer-lived cache, and USD
	// what the request cost (a begin's: what it reserved).
	CWL     uint64       `json:"cwl,omitempty"`
	USD     wire.PicoUSD `json:"usd,omitempty"`
	Status  int          `json:"status"`
	Cut     bool         `json:"cut,omitempty"`
	NoUsage bool         `json:"nousage,omitempty"`
	Est     bool         `json:"est,omitempty"` // the tokens are estimated
	Seconds float64      `json:"s"`
	// Tools are the provider-side tools' uses, by name.
	Tools map[string]uint64 `json:"tools,omitempty"`
	// Begin marks a request begun, not a request counted: its In and
	// Out are what it reserved. Of is the begin line a request's end
	// closes.
	Begin bool   `json:"begin,omitempty"`
	Of    uint64 `json:"of,omitempty"`
	// Task is the task the request is charged to (its place in the
	// tasks' stream). OOB marks, instead of a request, that the task's
	// request was refused past its budget (wire.TaskBudget.String).
	Task uint64 `json:"task,omitempty"`
	OOB  string `json:"oob,omitempty"`
}

type snapshot struct {
	Seq    uint64          `json:"seq"`
	Counts []snapshotCount `json:"counts"`
	Tasks  []taskCount     `json:"tasks,omitempty"`
}

type snapshotCount struct {
	Agent    int             `json:"agent"`
	Provider string          `json:"provider"`
	Usage    wire.ModelUsage `json:"usage"`
}

// OpenStore reads the counts in dir (none yet: empty) and opens its log
// for the requests to come. A line the proxy was killed while writing
// (the last, torn) is dropped: its request had not ended in the counts.
func OpenStore(dir string) (*Store, error) {
	s := &Store{dir: dir, counts: map[key]*wire.ModelUsage{}, changed: map[int]bool{}, begun: map[uint64]logLine{}, tasks: map[uint64]*taskCount{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the counts' directory: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading the counts: %w", err)
	default:
		var snap snapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			return nil, fmt.Errorf("reading the counts %s: %w", filepath.Join(dir, snapshotFile), err)
		}
		s.seq = snap.Seq
		for _, c := range snap.Counts {
			u := c.Usage
			fixBuckets(&u)
			s.counts[key{c.Agent, c.Provider}] = &u
		}
		for _, t := range snap.Tasks {
			s.tasks[t.Seq] = &t
		}
	}
	lp := filepath.Join(dir, logFile)
	if f, err := os.Open(lp); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		open := map[uint64]logLine{}
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue // torn
			}
			if l.Begin {
				// A begin is written again after each compaction
				// while its request is under way: it may precede the
				// snapshot's seq.
				open[l.Seq] = l
				continue
			}
			delete(open, l.Of) // ended, whether or not in the snapshot
			if l.Seq <= s.seq {
				continue // already in the snapshot
			}
			s.apply(l)
			s.seq = l.Seq
			s.logged++
		}
		f.Close()
		// Requests begun and never ended: the proxy was killed while
		// they were under way. Their tokens were spent, how many is not
		// known: each is counted as cut, at what it reserved (its most),
		// and marked estimated, so that no limit is outrun by a crash.
		for _, seq := range slices.Sorted(maps.Keys(open)) {
			l := open[seq]
			s.seq = max(s.seq, seq) + 1
			l.Seq, l.Begin, l.Cut, l.Est, l.Status = s.seq, false, true, true, 499
			s.apply(l)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the requests' log: %w", err)
	}
	// Start from a clean snapshot: the torn line goes, the log is empty.
	if err := s.writeSnapshot(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lp, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the requests' log: %w", err)
	}
	s.log, s.logged = f, 0
	for k := range s.counts {
		s.changed[k.Agent] = true
	}
	return s, nil
}

// Begin logs a request of agent to provider about to be sent, with the
// input and output it reserved, and returns what its Outcome's Begun must
// be: a proxy killed before the request ends counts it, when it opens the
// store again, at what it reserved.
func (s *Store) Begin(agent int, provider string, at time.Time, input, output uint64, cost wire.PicoUSD, task uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	l := logLine{Seq: s.seq, At: at.UnixNano(), Agent: agent, Provider: provider, In: input, Out: output, USD: cost, Begin: true, Task: task}
	s.begun[l.Seq] = l
	return l.Seq, s.append(l)
}

// Record counts a request of agent to provider that ended as o, in
// memory and in the log.
func (s *Store) Record(agent int, provider string, o Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	l := logLine{Seq: s.seq, At: o.At.UnixNano(), Agent: agent, Provider: provider, In: o.Usage.InputTokens, Out: o.Usage.OutputTokens,
		CR: o.Usage.CacheReadTokens, CW: o.Usage.CacheWriteTokens, CWL: o.Usage.CacheWriteLongTokens, USD: o.Cost, Status: o.Status, Cut: o.Cut, NoUsage: o.NoUsage,
		Est: o.Usage.Estimated, Seconds: o.Duration.Seconds(), Tools: o.Usage.ServerTools.Map(), Of: o.Begun, Task: o.Task}
	delete(s.begun, o.Begun)
	s.apply(l)
	err := s.append(l)
	if s.log != nil && s.logged >= compactAfter {
		err = errors.Join(err, s.compact())
	}
	return err
}

// append writes l to the log.
func (s *Store) append(l logLine) error {
	if s.log == nil {
		return nil
	}
	b, _ := json.Marshal(l)
	s.unsynced = true
	s.logged++
	if _, err := s.log.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("appending to the requests' log: %w", err)
	}
	return nil
}

// apply counts one logged request: the one code for a request now and a
// request replayed.
func (s *Store) apply(l logLine) {
	at := time.Unix(0, l.At).UTC()
	if l.Task != 0 {
		s.applyTask(l, at)
	}
	if l.OOB != "" {
		return // not a request
	}
	u := s.usage(key{l.Agent, l.Provider})
	t := l.tokens()
	u.Tokens.Add(t)
	u.Count(at, t.Total(), l.USD)
	for _, g := range s.memberOf[l.Agent] {
		s.groups[g].Count(at, t.Total(), l.USD)
	}
	if l.Est {
		u.EstimatedRequests++
	}
	for tool, n := range l.Tools {
		if u.ServerToolUses == nil {
			u.ServerToolUses = map[string]uint64{}
		}
		u.ServerToolUses[tool] += n
	}
	switch {
	case l.Cut:
		bump(&u.Errors, ErrorCut)
	case l.NoUsage:
		bump(&u.Errors, ErrorNoUsage)
	case l.Status >= 400:
		bump(&u.Errors, strconv.Itoa(l.Status))
	}
	i, _ := slices.BinarySearch(wire.LatencyBounds, l.Seconds)
	u.LatencyBuckets[i]++
	u.LatencySeconds += l.Seconds
	s.changed[l.Agent] = true
}

// tokens are l's counts (a begin's: what it reserved).
func (l logLine) tokens() wire.Tokens {
	return wire.Tokens{InputTokens: l.In, OutputTokens: l.Out, CacheReadTokens: l.CR, CacheWriteTokens: l.CW, CacheWriteLongTokens: l.CWL}
}

func bump(m *map[string]uint64, k string) {
	if *m == nil {
		*m = map[string]uint64{}
	}
	(*m)[k]++
}

func (s *Store) usage(k key) *wire.ModelUsage {
	u := s.counts[k]
	if u == nil {
		u = &wire.ModelUsage{}
		fixBuckets(u)
		s.counts[k] = u
	}
	return u
}

// fixBuckets gives u one bucket per bound and +Inf (a snapshot written
// with other bounds: its counts stay, in the buckets that fit).
func fixBuckets(u *wire.ModelUsage) {
	if n := len(wire.LatencyBounds) + 1; len(u.LatencyBuckets) != n {
		b := make([]uint64, n)
		copy(b, u.LatencyBuckets)
		u.LatencyBuckets = b
	}
}

// Refused counts a request of agent to provider that flock answered
// itself, over limit.
func (s *Store) Refused(agent int, provider, limit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bump(&s.usage(key{agent, provider}).Refused, limit)
	s.changed[agent] = true
}

// Window is what agent spent of provider today and this month as of now
// (UTC), for the limits.
func (s *Store) Window(agent int, provider string, now time.Time) (day, month wire.Spend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.counts[key{agent, provider}]; u != nil {
		return u.Windows(now)
	}
	return day, month
}

// SetGroups makes the budgets' windows those of groups (each budget's
// member agents, by name), as of now: counted again from each member's
// counts, then with each request a member makes.
func (s *Store) SetGroups(groups map[string][]int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Each agent's windows once, then each budget's members': linear in
	// the counts and the memberships, however many budgets hold whom.
	type spent struct{ day, month wire.Spend }
	byAgent := map[int]spent{}
	for k, u := range s.counts {
		day, month := u.Windows(now)
		a := byAgent[k.Agent]
		a.day.Tokens, a.day.Cost = a.day.Tokens+day.Tokens, a.day.Cost+day.Cost
		a.month.Tokens, a.month.Cost = a.month.Tokens+month.Tokens, a.month.Cost+month.Cost
		byAgent[k.Agent] = a
	}
	s.groups, s.memberOf = map[string]*wire.ModelUsage{}, map[int][]string{}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := &wire.ModelUsage{Day: now.UTC().Format(wire.DayLayout), Month: now.UTC().Format(wire.MonthLayout)}
		for _, a := range groups[name] {
			s.memberOf[a] = append(s.memberOf[a], name)
			sp := byAgent[a]
			g.DayTokens, g.DayCost = g.DayTokens+sp.day.Tokens, g.DayCost+sp.day.Cost
			g.MonthTokens, g.MonthCost = g.MonthTokens+sp.month.Tokens, g.MonthCost+sp.month.Cost
		}
		s.groups[name] = g
	}
}

// Group is what budget name's agents spent together today and this month
// as of now.
func (s *Store) Group(name string, now time.Time) (day, month wire.Spend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[name]; g != nil {
		return g.Windows(now)
	}
	return day, month
}

// Usage is a copy of agent's counts, by provider.
func (s *Store) Usage(agent int) map[string]wire.ModelUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]wire.ModelUsage{}
	for k, u := range s.counts {
		if k.Agent == agent {
			c := *u
			c.Errors, c.Refused, c.ServerToolUses = maps.Clone(u.Errors), maps.Clone(u.Refused), maps.Clone(u.ServerToolUses)
			c.LatencyBuckets = slices.Clone(u.LatencyBuckets)
			out[k.Provider] = c
		}
	}
	return out
}

// Changed are the agents whose counts changed since the last call, in
// id order (whose reports to publish).
func (s *Store) Changed() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.changed))
	clear(s.changed)
	return ids
}

// Agents are every agent with counts, in id order.
func (s *Store) Agents() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int]bool{}
	for k := range s.counts {
		seen[k.Agent] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Sync writes the log through to the disk if it grew since the last
// Sync: flock-proxy calls it every second.
func (s *Store) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unsynced || s.log == nil {
		return nil
	}
	s.unsynced = false
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("syncing the requests' log: %w", err)
	}
	return nil
}

// Snapshot writes the counts (the refusals with them) and empties the log.
func (s *Store) Snapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compact()
}

func (s *Store) compact() error {
	s.pruneTasks(time.Now())
	if err := s.writeSnapshot(); err != nil {
		return err
	}
	s.logged = 0
	if s.log == nil {
		return nil
	}
	// The snapshot holds every line up to seq: a crash before this
	// truncation replays none of them twice.
	if err := s.log.Truncate(0); err != nil {
		return fmt.Errorf("emptying the requests' log: %w", err)
	}
	// The requests under way keep their begin lines.
	for _, seq := range slices.Sorted(maps.Keys(s.begun)) {
		if err := s.append(s.begun[seq]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) writeSnapshot() error {
	snap := snapshot{Seq: s.seq, Counts: []snapshotCount{}, Tasks: s.tasksList()}
	for _, k := range slices.SortedFunc(maps.Keys(s.counts), func(a, b key) int {
		if a.Agent != b.Agent {
			return a.Agent - b.Agent
		}
		return cmp.Compare(a.Provider, b.Provider)
	}) {
		snap.Counts = append(snap.Counts, snapshotCount{Agent: k.Agent, Provider: k.Provider, Usage: *s.counts[k]})
	}
	b, err := json.MarshalIndent(snap, "", " ")
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(filepath.Join(s.dir, snapshotFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the counts: %w", err)
	}
	return nil
}

// Close snapshots the counts and closes the log.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.compact()
	if s.log != nil {
		err = errors.Join(err, s.log.Close())
		s.log = nil
	}
	return err
}
