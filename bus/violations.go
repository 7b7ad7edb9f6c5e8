package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/spec"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// violationsFile is the ledger's file in the bus's StoreDir.
const violationsFile = "violations.json"

// ledgerFlushEvery is how often a changed ledger is written, and how
// often the log's rate-limit windows are closed.
const ledgerFlushEvery = 5 * time.Second

// ledger counts violations per agent and kind in the bus process itself:
// the journal is no record (journald drops a flooding unit's lines, and
// those of everyone else with them), so status reads these counts. They
// are written to the StoreDir and read back at start: a bus restart does
// not wipe an agent's record.
type ledger struct {
	mu     sync.Mutex
	path   string
	counts map[int]map[string]uint64
	known  map[int]bool // the agents of the config in force: no one else is counted
	dirty  bool
}

// ledgerFileV is violationsFile's content.
type ledgerFileV struct {
	Agents map[int]map[string]uint64 `json:"agents"`
}

// loadLedger reads path, keeping only the agents in keep. A file that
// cannot be read is moved aside (path.bad) and the count starts again:
// the bus must come up, and the old file stays for the operator.
func loadLedger(path string, keep map[int]bool) (*ledger, error) {
	l := &ledger{path: path, counts: map[int]map[string]uint64{}, known: keep}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	var f ledgerFileV
	if err == nil {
		err = json.Unmarshal(data, &f)
	}
	if err != nil {
		if rerr := os.Rename(path, path+".bad"); rerr != nil {
			return l, fmt.Errorf("reading the violations %s: %w; moving it aside: %w", path, err, rerr)
		}
		return l, fmt.Errorf("reading the violations %s: %w (moved to %s.bad, counting from zero)", path, err, path)
	}
	for id, kinds := range f.Agents {
		if len(kinds) > 0 {
			l.counts[id] = kinds
		}
	}
	l.prune(keep)
	return l, nil
}

func (l *ledger) add(agent int, kind string) { l.addN(agent, kind, 1) }

// addN counts n violations of agent's of kind.
func (l *ledger) addN(agent int, kind string, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known[agent] {
		return // the operator may publish as any id; the ledger stays bounded
	}
	m := l.counts[agent]
	if m == nil {
		m = map[string]uint64{}
		l.counts[agent] = m
	}
	m[kind] += n
	l.dirty = true
}

// prune forgets agents not in keep, and counts only those from now on:
// a departed agent's id may be given to a new agent.
func (l *ledger) prune(keep map[int]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.known = keep
	for id := range l.counts {
		if !keep[id] {
			delete(l.counts, id)
			l.dirty = true
		}
	}
}

// of is agent's counts by kind (nil: none).
func (l *ledger) of(agent int) map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts[agent])
}

// save writes the counts if they changed since the last save.
func (l *ledger) save() error {
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return nil
	}
	f := ledgerFileV{Agents: map[int]map[string]uint64{}}
	for id, kinds := range l.counts {
		f.Agents[id] = maps.Clone(kinds)
	}
	l.dirty = false
	l.mu.Unlock()
	data, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = fsutil.WriteAtomic(l.path, append(data, '\n'), 0o600)
	}
	if err != nil {
		l.mu.Lock()
		l.dirty = true // try again at the next flush
		l.mu.Unlock()
		return fmt.Errorf("writing the violations to %s: %w", l.path, err)
	}
	return nil
}

// agentsOf is the agent ids of c.
func agentsOf(c Config) map[int]bool {
	m := map[int]bool{}
	for _, u := range c.Users {
		if u.Agent > 0 {
			m[u.Agent] = true
		}
	}
	return m
}

// Violation records a violation by agent the bus itself found (kind: a
// wire.Violation* kind; detail says what it was): counted, and logged
// within the agent's limit for that kind. Parts of the bus that judge
// agents' messages (the task desk) report through it.
func (s *Server) Violation(agent int, kind, detail string) {
	s.ledger.add(agent, kind)
	s.log.agentLine(agent, kind, "[WRN]", "%s (agent %d): %s violation: %s", spec.UserName(agent), agent, kind, detail)
}

// keepLedger closes the log's rate-limit windows and writes the ledger
// every ledgerFlushEvery until stop is closed, then once more for good.
func (s *Server) keepLedger(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(ledgerFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			s.log.closeWindows(true)
			if err := s.ledger.save(); err != nil {
				s.log.Errorf("%v", err)
			}
			return
		case <-t.C:
			s.log.closeWindows(false)
			if err := s.ledger.save(); err != nil {
				s.log.Errorf("%v", err)
			}
		}
	}
}

func ledgerPath(storeDir string) string { return filepath.Join(storeDir, violationsFile) }
