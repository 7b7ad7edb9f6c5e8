package units

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// Usage is what systemd counts of a loaded unit: restarts, how its main
// process last ended, and its cgroup's memory and CPU. A cgroup figure is
// nil where systemd has none ("[not set]": accounting off, a kernel
// without the file, or a container that does not delegate the
// controller), never a made-up zero.
type Usage struct {
	Restarts uint32
	LastExit Exit
	// Wall is the wall of flock's that likely made that exit (KilledBy:
	// the unit's own level and jit say what a signal means), "" if none.
	Wall        string
	MemoryBytes *uint64 // MemoryCurrent
	MemoryPeak  *uint64 // MemoryPeak (systemd 255 and later), else the cgroup's memory.peak
	CPUNSec     *uint64 // CPUUsageNSec
}

// usageWorkers bounds the property reads in flight on one connection:
// a scrape at 1000 agents is bound by round trips, not by systemd (16 in
// flight: 1.5-2 s, 64: 0.9-1 s, TestThousandAgents), and half of
// dbus-daemon's limit of pending replies per connection (128) leaves room.
const usageWorkers = 64

// Usage reads each named unit's Usage, usageWorkers at a time over one
// connection: a Get of each of usageProperties. Name only loaded
// units (List's): systemd loads a unit asked for by object path, so a
// collected transient unit would come back. A unit gone meanwhile is left
// out; the first other error is returned with what was read.
func (s *Systemd) Usage(ctx context.Context, names []string) (map[string]Usage, error) {
	out := make(map[string]Usage, len(names))
	var mu sync.Mutex
	var errs []error
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(usageWorkers, len(names)) {
		wg.Go(func() {
			for name := range work {
				p, err := s.usageProps(ctx, name)
				mu.Lock()
				switch {
				case err == nil:
					u := usageOf(p)
					if u.MemoryPeak == nil {
						u.MemoryPeak = cgroupPeak(p["ControlGroup"])
					}
					u.Wall, err = s.wallOf(ctx, name, u.LastExit)
					out[name] = u
					if err != nil && !isDBusError(err, "org.freedesktop.systemd1.NoSuchUnit") {
						errs = append(errs, err)
					}
				case !isDBusError(err, "org.freedesktop.systemd1.NoSuchUnit"):
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return out, fmt.Errorf("reading %d of %d units: %w", len(errs), len(names), errs[0])
	}
	return out, nil
}

// usageProperties are the Service properties Usage reads, each with its
// own Get: a GetAll of the Service interface has systemd compute and send
// some 250 properties (IP and IO accounting among them); at 1000 agents
// the Gets made a scrape a quarter quicker.
var usageProperties = []string{"NRestarts", "ExecMainCode", "ExecMainStatus", "MemoryCurrent", "MemoryPeak", "CPUUsageNSec", "ControlGroup"}

// usageProps reads usageProperties of the named unit; one systemd does
// not have (MemoryPeak before 255) is left out.
func (s *Systemd) usageProps(ctx context.Context, name string) (map[string]any, error) {
	p := make(map[string]any, len(usageProperties))
	for _, prop := range usageProperties {
		v, err := s.conn.GetUnitTypePropertyContext(ctx, name, "Service", prop)
		switch {
		case err == nil:
			p[prop] = v.Value.Value()
		case isDBusError(err, "org.freedesktop.DBus.Error.UnknownProperty"), isDBusError(err, "org.freedesktop.DBus.Error.InvalidArgs"):
		default:
			return nil, fmt.Errorf("Get %s Service.%s: %w", name, prop, err)
		}
	}
	return p, nil
}

// wallOf is the wall that likely made a unit's last exit (KilledBy),
// read from its ExecStart and Environment only when the exit may be a
// wall's (mayBeWall): healthy agents cost a scrape no more reads.
func (s *Systemd) wallOf(ctx context.Context, name string, e Exit) (string, error) {
	if !mayBeWall(e) {
		return "", nil
	}
	var v [2]any
	for i, prop := range []string{"ExecStart", "Environment"} {
		p, err := s.conn.GetUnitTypePropertyContext(ctx, name, "Service", prop)
		if err != nil {
			return "", fmt.Errorf("Get %s Service.%s: %w", name, prop, err)
		}
		v[i] = p.Value.Value()
	}
	return wallOfUnit(v[0], v[1], e), nil
}

// wallOfUnit is KilledBy's wall for the agent a unit's ExecStart and
// Environment describe; "" if none, or if the unit is not one ForAgent
// made.
func wallOfUnit(execStart, environment any, e Exit) string {
	a, err := agentOfUnit(execStart, environment)
	if err != nil {
		return ""
	}
	d, ok := KilledBy(a, e)
	if !ok {
		return ""
	}
	return d.Wall
}

// usageOf reads Usage from a Service interface's properties.
func usageOf(p map[string]any) Usage {
	u := Usage{}
	u.Restarts, _ = p["NRestarts"].(uint32)
	code, _ := p["ExecMainCode"].(int32)
	status, _ := p["ExecMainStatus"].(int32)
	u.LastExit = exitOf(code, status)
	u.MemoryBytes, u.MemoryPeak, u.CPUNSec = counted(p["MemoryCurrent"]), counted(p["MemoryPeak"]), counted(p["CPUUsageNSec"])
	return u
}

// cgroupRoot is where the cgroup v2 hierarchy is mounted (a variable for
// tests).
var cgroupRoot = "/sys/fs/cgroup"

// cgroupPeak reads memory.peak (kernel 5.19 and later) of the unit's
// cgroup, for a systemd older than 255, which has no MemoryPeak: a
// world-readable file, readable under ProtectControlGroups=. nil when the
// kernel has none (no memory controller there, cgroup v1).
func cgroupPeak(controlGroup any) *uint64 {
	cg, _ := controlGroup.(string)
	if cg == "" || strings.Contains(cg, "..") {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(cgroupRoot, cg, "memory.peak"))
	if err != nil {
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// counted is a cgroup figure as systemd reports it: absent, or the
// maximum uint64 for "not set", is nil.
func counted(v any) *uint64 {
	n, ok := v.(uint64)
	if !ok || n == math.MaxUint64 {
		return nil
	}
	return &n
}

// exitOf is ExecMainCode and ExecMainStatus as an Exit: siginfo's CLD_*
// codes, as systemd reports them.
func exitOf(code, status int32) Exit {
	return Exit{Code: map[int32]string{1: "exited", 2: "killed", 3: "dumped"}[code], Status: int(status)}
}

// Observer reads the agents' units over the system bus (dbus-daemon),
// where any user may read them: flock.service, which has no privileges
// and so no way to systemd's private socket, reports them in /metrics.
// It connects at first use, and again after an error.
type Observer struct {
	mu sync.Mutex
	s  *Systemd
}

// ErrNoSystemBus means the system bus could not be reached.
var ErrNoSystemBus = errors.New("no D-Bus system bus to read systemd's units from (is dbus installed and running?)")

func (o *Observer) conn(ctx context.Context) (*Systemd, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.s == nil {
		// Not ctx itself: godbus closes a connection when the context it
		// was made with ends, and ctx is one scrape's.
		c, err := sd.NewSystemConnectionContext(context.WithoutCancel(ctx))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoSystemBus, err)
		}
		o.s = &Systemd{conn: c}
	}
	return o.s, nil
}

// drop closes s after an error, so the next call connects afresh.
func (o *Observer) drop(s *Systemd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.s == s {
		o.s.Close()
		o.s = nil
	}
}

// List is Systemd.List over the system bus.
func (o *Observer) List(ctx context.Context) ([]Status, error) {
	s, err := o.conn(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.List(ctx)
	if err != nil {
		o.drop(s)
	}
	return l, err
}

// Usage is Systemd.Usage over the system bus.
func (o *Observer) Usage(ctx context.Context, names []string) (map[string]Usage, error) {
	s, err := o.conn(ctx)
	if err != nil {
		return nil, err
	}
	return s.Usage(ctx, names)
}

// ActiveState is Systemd.ActiveState over the system bus.
func (o *Observer) ActiveState(ctx context.Context, name string) (string, error) {
	s, err := o.conn(ctx)
	if err != nil {
		return "", err
	}
	st, err := s.ActiveState(ctx, name)
	if err != nil && !errors.Is(err, ErrNotLoaded) {
		o.drop(s)
	}
	return st, err
}

// Close closes the connection, if any.
func (o *Observer) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.s != nil {
		o.s.Close()
		o.s = nil
	}
}
