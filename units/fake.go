package units

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
)

// Fake is an in-memory Manager for planner tests.
type Fake struct {
	mu       sync.Mutex
	units    map[string]Status
	props    map[string]map[string]any
	started  []string
	services map[string]ServiceStatus // static units; absent: noService
	restarts map[string]int
	reloads  map[string]int
	usage    map[string]Usage // cgroup figures by unit (SetUsage)
}

// NewFake returns a manager with no units and no static units.
func NewFake() *Fake {
	return &Fake{units: map[string]Status{}, props: map[string]map[string]any{},
		services: map[string]ServiceStatus{}, restarts: map[string]int{}, reloads: map[string]int{}, usage: map[string]Usage{}}
}

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
	hash, build := FromDescription(u.Description)
	f.units[u.Name] = Status{Name: u.Name, ActiveState: "active", SubState: "running", Hash: hash, Build: build}
	f.started = append(f.started, u.Name)
	props := map[string]any{"Id": u.Name, "Description": u.Description}
	for _, p := range u.Properties {
		props[p.Name] = p.Value // the Go value, as planned: explain compares both forms
	}
	f.props[u.Name] = props
	return nil
}

// Properties is what Start was given, plus Id and Description, and any
// SetProperty since.
func (f *Fake) Properties(ctx context.Context, name string) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.units[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, ErrNotLoaded)
	}
	p := maps.Clone(f.props[name])
	p["ActiveState"], p["SubState"] = st.ActiveState, st.SubState
	return p, nil
}

// ActiveState is an agent unit's state, or a static unit's while it has
// a file.
func (f *Fake) ActiveState(ctx context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.units[name]; ok {
		return st.ActiveState, nil
	}
	if st, ok := f.services[name]; ok && st.File != nil && !isTemplate(name) {
		return st.ActiveState, nil
	}
	return "", fmt.Errorf("%s: %w", name, ErrNotLoaded)
}

// SetProperty is drift: a property changed behind flock's back (as
// `systemctl set-property` does); nil removes it (a unit started
// without it).
func (f *Fake) SetProperty(name, prop string, v any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.props[name]; ok && v == nil {
		delete(p, prop)
	} else if ok {
		p[prop] = v
	}
}

func (f *Fake) Stop(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.units, name)
	delete(f.props, name)
	return nil
}

// Exit reports what SetExit recorded.
func (f *Fake) Exit(ctx context.Context, name string) (uint32, Exit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.units[name]
	return s.Restarts, s.LastExit
}

// Usage is SetExit's restarts and exit and SetUsage's cgroup figures of
// each named unit that is loaded, and the wall of that exit as systemd's
// would read it from the properties Start was given.
func (f *Fake) Usage(ctx context.Context, names []string) (map[string]Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Usage{}
	for _, n := range names {
		if s, ok := f.units[n]; ok {
			u := f.usage[n]
			u.Restarts, u.LastExit = s.Restarts, s.LastExit
			if mayBeWall(u.LastExit) {
				u.Wall = wallOfUnit(f.props[n]["ExecStart"], f.props[n]["Environment"], u.LastExit)
			}
			out[n] = u
		}
	}
	return out, nil
}

// SetUsage sets the cgroup figures Usage reports of the named unit.
func (f *Fake) SetUsage(name string, u Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage[name] = u
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

func (f *Fake) service(name string) ServiceStatus {
	if st, ok := f.services[name]; ok {
		return st
	}
	if isTemplate(name) {
		return ServiceStatus{}
	}
	return noService
}

func (f *Fake) Service(ctx context.Context, name string) (ServiceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStatic(name); err != nil {
		return ServiceStatus{}, err
	}
	return f.service(name), nil
}

func (f *Fake) InstallService(ctx context.Context, name string, content []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStatic(name); err != nil {
		return err
	}
	st := f.service(name)
	st.File = append([]byte(nil), content...)
	st.Enabled = "enabled"
	if isTemplate(name) { // systemd has no state of a template
		st.Enabled, st.ActiveState = "", ""
	}
	st.NoAccount = false
	f.services[name] = st
	return nil
}

// DropAccount is drift: the static account of an installed unit deleted
// by hand (userdel flock-bus).
func (f *Fake) DropAccount(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.services[name]; ok && st.File != nil {
		st.NoAccount = true
		f.services[name] = st
	}
}

func (f *Fake) OweRestart(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStarted(name); err != nil {
		return err
	}
	st := f.service(name)
	st.RestartOwed = true
	f.services[name] = st
	return nil
}

func (f *Fake) RestartService(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStarted(name); err != nil {
		return err
	}
	st := f.service(name)
	st.ActiveState, st.RestartOwed = "active", false
	f.services[name] = st
	f.restarts[name]++
	return nil
}

func (f *Fake) ReloadService(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStarted(name); err != nil {
		return err
	}
	if f.service(name).ActiveState != "active" {
		return fmt.Errorf("ReloadUnit %s: unit not active", name)
	}
	f.reloads[name]++
	return nil
}

func (f *Fake) RemoveService(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkStatic(name); err != nil {
		return err
	}
	delete(f.services, name)
	return nil
}

// ServiceRestarts counts RestartService calls of BusUnit.
func (f *Fake) ServiceRestarts() int { return f.Restarts(BusUnit) }

// Restarts counts RestartService calls of a static unit.
func (f *Fake) Restarts(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts[name]
}

// Reloads counts ReloadService calls of a static unit.
func (f *Fake) Reloads(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads[name]
}

// StopService is drift: someone stopped the bus by hand.
func (f *Fake) StopService() { f.StopStatic(BusUnit) }

// StopStatic is drift: someone stopped a static unit by hand.
func (f *Fake) StopStatic(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.service(name)
	st.ActiveState = "inactive"
	f.services[name] = st
}

func (f *Fake) Close() {}
