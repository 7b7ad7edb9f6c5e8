package proxy

import (
	"maps"
	"sort"
	"sync"
)

// SecretCount is what the proxy did with one agent's secret since it
// started: the requests that carried it (swapped or injected), and those
// refused, by reason (ReasonSecretRule, ReasonSecretUnbound).
type SecretCount struct {
	Agent   int
	Secret  string
	Swaps   uint64
	Refused map[string]uint64
}

type secretKey struct {
	agent  int
	secret string
}

// secretTally counts per agent and secret, in memory.
type secretTally struct {
	mu sync.Mutex
	m  map[secretKey]*SecretCount
}

func (t *secretTally) get(agent int, secret string) *SecretCount {
	if t.m == nil {
		t.m = map[secretKey]*SecretCount{}
	}
	k := secretKey{agent, secret}
	c := t.m[k]
	if c == nil {
		c = &SecretCount{Agent: agent, Secret: secret, Refused: map[string]uint64{}}
		t.m[k] = c
	}
	return c
}

func (t *secretTally) swapped(agent int, secret string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(agent, secret).Swaps++
}

func (t *secretTally) refusedOne(agent int, secret, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(agent, secret).Refused[reason]++
}

// SecretCounts are the counts of every agent's secrets that carried or
// were refused anything, by agent then secret.
func (s *Server) SecretCounts() []SecretCount {
	t := &s.secretCounts
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]SecretCount, 0, len(t.m))
	for _, c := range t.m {
		cp := *c
		cp.Refused = maps.Clone(c.Refused)
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Secret < out[j].Secret
	})
	return out
}
