package units

import (
	"context"
	"sort"
	"sync"
)

// Fake is an in-memory Manager for planner tests.
type Fake struct {
	mu       sync.Mutex
	units    map[string]Status
	started  []string
	service  ServiceStatus
	restarts int
}

// NewFake returns a manager with no units and no BusUnit.
func NewFake() *Fake { return &Fake{units: map[string]Status{}, service: noService} }

// noService is what systemd reports of a BusUnit it has no file for.
var noService = ServiceStatus{ActiveState: "inactive"}

var _ Manager = (*Fake)(nil)

func (f *Fake) List(ctx context.Context) ([]Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Status, 0, len(f.units))
	for _, s := range f.units {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) Start(ctx context.Context, u Unit) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.units[u.Name] = Status{Name: u.Name, ActiveState: "active", SubState: "running", Hash: HashFromDescription(u.Description)}
	f.started = append(f.started, u.Name)
	return nil
}

func (f *Fake) Stop(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.units, name)
	return nil
}

// Exit reports what SetExit recorded.
func (f *Fake) Exit(ctx context.Context, name string) (uint32, Exit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.units[name]
	return s.Restarts, s.LastExit
}

// SetExit records how the named unit's agent keeps dying.
func (f *Fake) SetExit(name string, restarts uint32, e Exit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.units[name]; ok {
		s.Restarts, s.LastExit = restarts, e
		f.units[name] = s
	}
}

// Fail is drift: the named unit's agent crashed for good.
func (f *Fake) Fail(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.units[name]; ok {
		s.ActiveState, s.SubState = "failed", "failed"
		f.units[name] = s
	}
}

// Started lists every unit name Start was called with, in order.
func (f *Fake) Started() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...)
}

func (f *Fake) Service(ctx context.Context) (ServiceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.service, nil
}

func (f *Fake) InstallService(ctx context.Context, content []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.service.File = append([]byte(nil), content...)
	f.service.Enabled = "enabled"
	return nil
}

func (f *Fake) RestartService(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.service.ActiveState = "active"
	f.restarts++
	return nil
}

func (f *Fake) RemoveService(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.service = noService
	return nil
}

// ServiceRestarts counts RestartService calls.
func (f *Fake) ServiceRestarts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts
}

// StopService is drift: someone stopped the bus by hand.
func (f *Fake) StopService() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.service.ActiveState = "inactive"
}

func (f *Fake) Close() {}
