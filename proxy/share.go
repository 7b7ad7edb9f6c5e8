package proxy

import (
	"sync"
)

// Share counts what each agent (by uid) holds of one thing every agent
// shares, and refuses the one beyond the agent's bound: the proxy's
// tunnels open, its handshakes in flight. It is the one kind of per-agent
// bound in the proxy: anything else it carries for agents at once (a
// model gateway's requests in flight) is one more Share.
type Share struct {
	mu   sync.Mutex
	held map[uint32]int
}

// Take takes one for uid unless it holds max already (max 0: no bound).
// It returns what uid held before, and a release that gives it back
// (once, however often it is called).
func (s *Share) Take(uid uint32, max int) (release func(), held int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[uint32]int{}
	}
	held = s.held[uid]
	if max > 0 && held >= max {
		return func() {}, held, false
	}
	s.held[uid] = held + 1
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[uid]--; s.held[uid] <= 0 {
				delete(s.held, uid)
			}
		})
	}, held, true
}

// Held is what uid holds now.
func (s *Share) Held(uid uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[uid]
}
