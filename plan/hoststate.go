package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// HostState is what Observe reads of a host before a spec is held against
// it. Observe reads it live and holds it against a Desired at once; saved
// (flockctl state save) it lets a plan be made off the host (flockctl plan
// --state), held against a spec there by the same Current.
type HostState struct {
	// Options are how this host's units are made (its systemd, programs
	// and runtimes): part of every unit's hash. Set by whoever saves the
	// state; Observe has its Desired's.
	Options  units.Options   `json:"options"`
	Accounts []users.Account `json:"accounts"`
	// Readers is the gid of the readers' group (spec.ReadersGroup); nil
	// when there is none.
	Readers *uint32        `json:"readers,omitempty"`
	Units   []units.Status `json:"units"`
	// Paths are the paths read that exist: one not here is missing.
	Paths []users.Path `json:"paths"`
	// Table is table inet flock as the kernel has it, in netpolicy.Render's
	// format; nil when there is none.
	Table     *string           `json:"table"`
	Keys      map[string]string `json:"keys"`
	BusConfig *bus.Config       `json:"bus_config"`
	// Services are flock's static units (units.StaticUnits) by name.
	Services    map[string]units.ServiceStatus `json:"services"`
	ProxyConfig []byte                         `json:"proxy_config"`
	// BusStatus is what the running bus said of itself, or BusErr why it
	// did not (neither when it was not running).
	BusStatus *wire.BusStatus `json:"bus_status,omitempty"`
	BusErr    error           `json:"-"`
	// SecretsMaterial is what is missing or wrong of the secrets'
	// material (creds.Material.Problems), path -> why.
	SecretsMaterial map[string]string `json:"secrets_material,omitempty"`
}

// Read reads h's side of a flock, with the state of each of paths. It
// changes nothing.
func Read(ctx context.Context, h Host, paths []string) (HostState, error) {
	s := HostState{Services: map[string]units.ServiceStatus{}}
	var err error
	if s.Accounts, err = h.Users.Accounts(ctx); err != nil {
		return s, fmt.Errorf("reading flock accounts: %w", err)
	}
	if gid, ok, err := h.Users.Readers(ctx); err != nil {
		return s, fmt.Errorf("reading group %s: %w", spec.ReadersGroup, err)
	} else if ok {
		s.Readers = &gid
	}
	for _, path := range paths {
		got, ok, err := h.Users.PathState(ctx, path)
		if err != nil {
			return s, fmt.Errorf("reading %s: %w", path, err)
		}
		if ok {
			s.Paths = append(s.Paths, got)
		}
	}
	if table, present, err := h.Firewall.Current(ctx); err != nil {
		return s, fmt.Errorf("reading table inet %s: %w", netpolicy.Table, err)
	} else if present {
		s.Table = &table
	}
	if s.Keys, err = h.Bus.Keys(ctx); err != nil {
		return s, fmt.Errorf("reading bus identities: %w", err)
	}
	if s.ProxyConfig, err = h.Proxy.Config(ctx); err != nil {
		return s, err
	}
	if h.Secrets != nil {
		if s.SecretsMaterial, err = h.Secrets.Problems(ctx); err != nil {
			return s, fmt.Errorf("reading the secrets' material: %w", err)
		}
	}
	return s, s.readRunning(ctx, h)
}

// ReadRunning is what a host shows one who is not root (the readers'
// group): its agents' units, flock's services, its bus's config and what
// the running bus says, asked as whoever h.Bus connects as. Not its
// accounts, paths, firewall or credentials: no drift can be planned from
// it, and its Current says nothing of them.
func ReadRunning(ctx context.Context, h Host) (Current, error) {
	s := HostState{Services: map[string]units.ServiceStatus{}}
	if err := s.readRunning(ctx, h); err != nil {
		return Current{}, err
	}
	return s.current(), nil
}

// readRunning reads into s what anyone may read of h: Read's part that
// ReadRunning shares.
func (s *HostState) readRunning(ctx context.Context, h Host) error {
	var err error
	if s.Units, err = h.Units.List(ctx); err != nil {
		return fmt.Errorf("listing flock units: %w", err)
	}
	if s.BusConfig, err = h.Bus.Config(ctx); err != nil {
		return fmt.Errorf("reading the bus config: %w", err)
	}
	for _, name := range units.StaticUnits {
		if s.Services[name], err = h.Units.Service(ctx, name); err != nil {
			return err
		}
	}
	if s.Services[units.BusUnit].ActiveState == "active" {
		s.BusStatus, s.BusErr = h.Bus.Status(ctx)
	}
	return nil
}

// current is s as a Current, before any path or rule is held against
// a plan.
func (s HostState) current() Current {
	c := Current{
		Accounts:        map[string]users.Account{},
		Readers:         s.Readers,
		Units:           map[string]units.Status{},
		BadPaths:        map[string]string{},
		Keys:            map[string]string{},
		BusConfig:       s.BusConfig,
		Service:         s.Services[units.BusUnit],
		BusStatus:       s.BusStatus,
		BusErr:          s.BusErr,
		ProxyConfig:     s.ProxyConfig,
		ProxyService:    s.Services[units.ProxyUnit],
		CountersSocket:  s.Services[units.CountersSocket],
		CountersService: s.Services[units.CountersTemplate],
		SecretsMaterial: s.SecretsMaterial,
	}
	for _, a := range s.Accounts {
		c.Accounts[a.Name] = a
	}
	for _, u := range s.Units {
		c.Units[u.Name] = u
	}
	for name, key := range s.Keys {
		c.Keys[name] = key
	}
	return c
}

// Current is the host in state s as Diff sees it against d. An empty
// HostState is a host flock never touched.
func (s HostState) Current(d Desired) (Current, error) {
	c := s.current()
	have := map[string]users.Path{}
	for _, p := range s.Paths {
		have[p.Path] = p
	}
	for _, want := range d.PathsWith(s.Readers) {
		got, ok := have[want.Path]
		why := pathDrift(want, got, ok)
		if ok && want.Group != "" && s.Readers == nil {
			why = "its group " + want.Group + " is missing"
		}
		if why != "" {
			c.BadPaths[want.Path] = why
		}
	}
	// Netpolicy's contract: Current renders as Render(p) exactly when the
	// table Matches p.
	want, err := netpolicy.Render(d.Policy)
	if err != nil {
		return c, fmt.Errorf("reading table inet %s: comparing it with the plan: %w", netpolicy.Table, err)
	}
	c.FirewallOK = s.Table != nil && *s.Table == want
	return c, nil
}

// FlockPaths are the paths the flocks ask of their hosts (users.Paths,
// users.ReaderPaths and users.Seeds, every host's agents), sorted, each
// once: what a saved state records, so that a plan of them off the host
// sees those as they are.
func FlockPaths(flocks ...*spec.Flock) []string {
	var out []string
	for _, f := range flocks {
		for _, p := range slices.Concat(users.Paths(f), users.ReaderPaths(), users.Seeds(f)) {
			out = append(out, p.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HostStateFormat is the version of EncodeHostState's encoding; a file of
// another is refused, not half read.
const HostStateFormat = 1

// savedHostState is the encoding: the state, its format, and the bus's
// error as text.
type savedHostState struct {
	Format int `json:"format"`
	HostState
	BusError string `json:"bus_error,omitempty"`
}

// EncodeHostState is s as flockctl state save writes it (JSON).
func EncodeHostState(s HostState) ([]byte, error) {
	saved := savedHostState{Format: HostStateFormat, HostState: s}
	if s.BusErr != nil {
		saved.BusError = s.BusErr.Error()
	}
	b, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the host state: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeHostState reads what EncodeHostState wrote.
func DecodeHostState(b []byte) (HostState, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var saved savedHostState
	if err := dec.Decode(&saved); err != nil {
		return HostState{}, fmt.Errorf("not a host state flockctl state save wrote: %w", err)
	}
	if saved.Format != HostStateFormat {
		return HostState{}, fmt.Errorf("a host state of format %d; this flockctl reads format %d: save it again with this version (flockctl state save FILE on the host)", saved.Format, HostStateFormat)
	}
	s := saved.HostState
	if saved.BusError != "" {
		s.BusErr = errors.New(saved.BusError)
	}
	return s, nil
}
