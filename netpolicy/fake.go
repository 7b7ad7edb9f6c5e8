package netpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Fake is an in-memory Firewall for planner tests. It validates policies as
// the real one does and remembers the last one ensured; Matches is true only
// for a policy equal to it (order of uids and allowances does not matter,
// as in the kernel).
type Fake struct {
	mu      sync.Mutex
	present bool
	policy  Policy
	ensures int
	refused map[uint32]Refusals
	extra   []struct {
		uid  uint32
		rule string
	}

	// Err, when set, is returned by every method: an unreachable kernel.
	Err error
}

var _ Firewall = (*Fake)(nil)

// NewFake returns a Fake with no table.
func NewFake() *Fake { return &Fake{} }

func (f *Fake) Ensure(ctx context.Context, p Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if err := ctx.Err(); err != nil { // as NFT: a cancelled call changes nothing
		return fmt.Errorf("nftables: replacing table inet %s: %w", Table, err)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("nftables: replacing table inet %s: %w", Table, err)
	}
	f.present, f.policy, f.extra, f.refused = true, p.canonical(), nil, nil
	f.ensures++
	return nil
}

func (f *Fake) Remove(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nftables: removing table inet %s: %w", Table, err)
	}
	f.present, f.policy, f.extra, f.refused = false, Policy{}, nil, nil
	return nil
}

func (f *Fake) Matches(ctx context.Context, p Policy) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return false, f.Err
	}
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("nftables: comparing table inet %s: %w", Table, err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("nftables: reading table inet %s: %w", Table, err)
	}
	return f.present && f.policy.String() == p.String(), nil
}

// Policy is the policy last ensured; ok is false when there is no table.
func (f *Fake) Policy() (p Policy, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy, f.present
}

// Current renders the table the last Ensure asked for, as NFT reads it
// back (rules added by hand are RulesFor's alone).
func (f *Fake) Current(ctx context.Context) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return "", false, f.Err
	}
	if err := ctx.Err(); err != nil {
		return "", false, fmt.Errorf("nftables: reading table inet %s: %w", Table, err)
	}
	if !f.present {
		return "", false, nil
	}
	text, err := Render(f.policy)
	if err != nil {
		return "", false, fmt.Errorf("nftables: reading table inet %s: %w", Table, err)
	}
	return text, true, nil
}

// Ensures counts successful Ensure calls, so a test can check that a plan
// with nothing to do does not replace the table.
func (f *Fake) Ensures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensures
}

// RulesFor renders the table the last Ensure asked for, as NFT reads it
// back; AddRule's extra rules (drift) come after ours.
func (f *Fake) RulesFor(ctx context.Context, uid uint32) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	if !f.present {
		return nil, nil
	}
	rules, err := PlannedRulesFor(f.policy, uid)
	if err != nil {
		return nil, fmt.Errorf("nftables: reading table inet %s: %w", Table, err)
	}
	for _, x := range f.extra {
		if x.uid == uid {
			rules = append(rules, x.rule)
		}
	}
	return rules, nil
}

// AddRule is drift: a rule for uid added by hand, as RulesFor prints it.
func (f *Fake) AddRule(uid uint32, rule string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extra = append(f.extra, struct {
		uid  uint32
		rule string
	}{uid, rule})
}

// Refused is what Refuse recorded since the last Ensure.
func (f *Fake) Refused(ctx context.Context) (map[uint32]Refusals, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nftables: reading table inet %s: %w", Table, err)
	}
	return maps.Clone(f.refused), nil
}

// Refuse is traffic: n denied packets of uid, sent faster than the log
// limit refills, so only the first FakeLogBurst of them since the last
// Ensure are logged. As in the kernel, only agents' packets are counted,
// and only while there is a table.
func (f *Fake) Refuse(uid uint32, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, agent := slices.BinarySearch(f.policy.AgentUIDs, uid); !f.present || !agent {
		return
	}
	if f.refused == nil {
		f.refused = map[uint32]Refusals{}
	}
	r := f.refused[uid]
	r.Refused, r.Logged = r.Refused+n, min(r.Logged+n, max(r.Logged, FakeLogBurst))
	f.refused[uid] = r
}

// FakeLogBurst is the log limit's burst in the table: how many refusals of
// one agent a sudden flood gets logged.
const FakeLogBurst = logBurst
