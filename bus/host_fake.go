package bus

import (
	"context"
	"sync"
)

// FakeHost is an in-memory Host for planner tests.
type FakeHost struct {
	*FakeIdentities
	mu      sync.Mutex
	config  *Config
	reloads int
}

var _ Host = (*FakeHost)(nil)

// NewFakeHost has no identities and no config.
func NewFakeHost() *FakeHost { return &FakeHost{FakeIdentities: NewFakeIdentities()} }

func (f *FakeHost) Config(ctx context.Context) (*Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.config == nil {
		return nil, nil
	}
	c := *f.config
	return &c, nil
}

func (f *FakeHost) WriteConfig(ctx context.Context, c Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config = &c
	return nil
}

func (f *FakeHost) RemoveConfig(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config = nil
	return nil
}

func (f *FakeHost) Reload(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	return nil
}

// Reloads counts Reload calls.
func (f *FakeHost) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}
