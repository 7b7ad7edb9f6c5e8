package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// FakeHost is an in-memory Host for planner tests. It keeps the config
// as System does, encoded: what it refuses, and what Config reads back,
// are System's.
type FakeHost struct {
	*creds.Fake
	mu      sync.Mutex
	config  []byte // as marshalled; nil when there is none
	loaded  []byte // the config in force, as marshalled; nil before a start
	reloads int
	old     bool // the bus in force is from before bus.sync (RunOld)
}

var _ Host = (*FakeHost)(nil)

// NewFakeHost has no identities and no config.
func NewFakeHost() *FakeHost { return &FakeHost{Fake: creds.NewFake()} }

func (f *FakeHost) Config(ctx context.Context) (*Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.config == nil {
		return nil, nil
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(f.config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding the fake's bus configuration: %w", err)
	}
	return &c, nil
}

func (f *FakeHost) WriteConfig(ctx context.Context, c Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.validate(); err != nil {
		return fmt.Errorf("writing bus configuration: %w", err)
	}
	data, err := c.marshal()
	if err != nil {
		return fmt.Errorf("encoding bus configuration: %w", err)
	}
	f.config = data
	return nil
}

func (f *FakeHost) RemoveConfig(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config = nil
	return nil
}

// Reload counts and puts the config in force; like System, it cannot
// reach a bus that has no config.
func (f *FakeHost) Reload(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.config == nil {
		return fmt.Errorf("%w: no bus configuration; run flockctl provision", ErrNoBus)
	}
	f.reloads++
	f.loaded = f.config
	return nil
}

// Started is the bus (re)started: it reads the installed config, as
// flock.service does. Tests wire it to their fake service's start.
func (f *FakeHost) Started() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded = f.config
	f.old = false
}

// RunOld makes the bus in force one from before bus.sync, which says
// nothing of how it syncs, until the next start.
func (f *FakeHost) RunOld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.old = true
}

// Status is a bus with no agent connected that has the config of its
// last start in force.
func (f *FakeHost) Status(ctx context.Context) (*wire.BusStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded == nil {
		return nil, fmt.Errorf("%w: the fake bus was never started", ErrNoBus)
	}
	var c Config
	if err := json.Unmarshal(f.loaded, &c); err != nil {
		return nil, err
	}
	st := &wire.BusStatus{Config: c.Digest(), Sync: SyncName(c.Tasks.Sync), Agents: map[int]wire.AgentOnBus{}}
	if f.old {
		st.Sync = ""
	}
	return st, nil
}

// Reloads counts Reload calls.
func (f *FakeHost) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}
