package creds

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/nats-io/nkeys"
)

// Fake is an in-memory Identities for planner tests. Its keys are
// real public user nkeys (so a Config built from them validates); it checks
// names as Store does.
type Fake struct {
	mu   sync.Mutex
	keys map[string]string

	// Err, when set, is returned by every method: an unreadable disk.
	Err error
	// Secret, when set, derives the agents' keys as Store does.
	Secret []byte
}

var _ Identities = (*Fake)(nil)

// NewFake returns a Fake holding no seeds.
func NewFake() *Fake { return &Fake{keys: map[string]string{}} }

func (f *Fake) Keys(ctx context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	if err := ctx.Err(); err != nil { // as Store: a cancelled call changes nothing
		return nil, err
	}
	return maps.Clone(f.keys), nil
}

func (f *Fake) Ensure(ctx context.Context, name string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return "", false, f.Err
	}
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	if err := checkName(name); err != nil {
		return "", false, fmt.Errorf("ensuring a bus identity: %w", err)
	}
	if f.Secret != nil && Derived(name) {
		want, err := AgentKey(f.Secret, name)
		if err != nil {
			return "", false, err
		}
		created := f.keys[name] != want
		f.keys[name] = want
		return want, created, nil
	}
	if pub, ok := f.keys[name]; ok {
		return pub, false, nil
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", false, fmt.Errorf("creating the nkey of %s: %w", name, err)
	}
	pub, _ := kp.PublicKey()
	f.keys[name] = pub
	return pub, true, nil
}

func (f *Fake) Remove(ctx context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if err := checkName(name); err != nil {
			return fmt.Errorf("removing a bus identity: %w", err)
		}
	}
	for _, name := range names {
		delete(f.keys, name)
	}
	return nil
}

func (f *Fake) RemoveAll(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	clear(f.keys)
	return nil
}
