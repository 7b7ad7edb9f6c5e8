package netpolicy

import (
	"context"
	"fmt"
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
	f.present, f.policy = true, p.canonical()
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
	f.present, f.policy = false, Policy{}
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

// Current is the policy last ensured; ok is false when there is no table.
func (f *Fake) Current() (p Policy, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy, f.present
}

// Ensures counts successful Ensure calls, so a test can check that a plan
// with nothing to do does not replace the table.
func (f *Fake) Ensures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensures
}
