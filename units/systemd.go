package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Systemd is the real Manager: systemd's private D-Bus socket, which needs
// no dbus-daemon and is what systemctl itself uses as root.
type Systemd struct {
	conn    *sd.Conn
	UnitDir string // where BusUnit is written; "" is DefaultUnitDir
	OwedDir string // the restarts owed (owed.go); "" is DefaultOwedDir
}

var _ Manager = (*Systemd)(nil)

// Connect opens the connection to systemd.
func Connect(ctx context.Context) (*Systemd, error) {
	if _, err := os.Stat("/run/systemd/private"); err != nil {
		return nil, fmt.Errorf("%w: /run/systemd/private: %v", ErrNoSystemd, err)
	}
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to /run/systemd/private: %v", ErrNoSystemd, err)
	}
	return &Systemd{conn: conn}, nil
}

// ConnectReader opens a connection to systemd through the system bus,
// as systemctl does for a user who is not root: the units' states and
// properties are anyone's to read there (and changing one is polkit's to
// refuse). The read-only verbs of the readers' group use it.
func ConnectReader(ctx context.Context) (*Systemd, error) {
	conn, err := sd.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to systemd over the system bus: %v", ErrNoSystemd, err)
	}
	return &Systemd{conn: conn}, nil
}

func (s *Systemd) Close() { s.conn.Close() }

// Version is systemd's major version, e.g. 252.
func (s *Systemd) Version(ctx context.Context) (int, error) {
	raw, err := s.conn.GetManagerProperty("Version")
	if err != nil {
		return 0, fmt.Errorf("reading systemd's version: %w", err)
	}
	v := strings.Trim(raw, `"`)
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		v = v[:end]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("systemd's version %s: %w", raw, err)
	}
	return n, nil
}

func (s *Systemd) List(ctx context.Context) ([]Status, error) {
	us, err := s.conn.ListUnitsByPatternsContext(ctx, nil, []string{Prefix + "*.service"})
	if err != nil {
		return nil, fmt.Errorf("ListUnitsByPatterns %s*: %w", Prefix, err)
	}
	out := make([]Status, 0, len(us))
	for _, u := range us {
		if u.LoadState != "loaded" {
			continue // a name someone asked about, not a unit
		}
		hash, build := FromDescription(u.Description)
		out = append(out, Status{Name: u.Name, ActiveState: u.ActiveState, SubState: u.SubState, Hash: hash, Build: build})
	}
	return out, nil
}

// Exit reads how often the unit restarted and how its main process last
// ended; zero values where systemd did not say (a unit gone meanwhile).
func (s *Systemd) Exit(ctx context.Context, name string) (restarts uint32, exit Exit) {
	get := func(prop string) any {
		p, err := s.conn.GetUnitTypePropertyContext(ctx, name, "Service", prop)
		if err != nil {
			return nil
		}
		return p.Value.Value()
	}
	restarts, _ = get("NRestarts").(uint32)
	code, _ := get("ExecMainCode").(int32)
	status, _ := get("ExecMainStatus").(int32)
	return restarts, exitOf(code, status)
}

// Start replaces any unit of the same name with u and waits for systemd's
// start job. With Type=exec the job fails when the runner cannot be
// started, so a broken unit is an error here, not a surprise later.
func (s *Systemd) Start(ctx context.Context, u Unit) error {
	props := u.DBusProperties()
	// A new unit starts at once, as the floor's does; one that is there
	// (running, failed, or stopping) is stopped first, and a stopped
	// transient unit is unloaded a moment after its stop job.
	stopped := false
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := make(chan string, 1)
		_, err := s.conn.StartTransientUnitContext(ctx, u.Name, "fail", props, done)
		if isDBusError(err, "org.freedesktop.systemd1.UnitExists") && !stopped {
			if err := s.Stop(ctx, u.Name); err != nil {
				return err
			}
			stopped, deadline = true, time.Now().Add(10*time.Second)
			continue
		}
		if isDBusError(err, "org.freedesktop.systemd1.UnitExists") && time.Now().Before(deadline) {
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("StartTransientUnit %s: %w", u.Name, err)
		}
		return s.waitJob(ctx, u.Name, "start", done)
	}
}

// DBusProperties are u's description and properties as
// StartTransientUnit takes them.
func (u Unit) DBusProperties() []sd.Property {
	props := make([]sd.Property, 0, len(u.Properties)+1)
	props = append(props, sd.PropDescription(u.Description))
	for _, p := range u.Properties {
		props = append(props, sd.Property{Name: p.Name, Value: dbus.MakeVariant(p.Value)})
	}
	return props
}

// Stop stops name, clears a failed state and waits until systemd has
// forgotten the unit (an agent's, transient). A unit that is not loaded
// is already stopped.
func (s *Systemd) Stop(ctx context.Context, name string) error {
	if err := s.stop(ctx, name); err != nil {
		return err
	}
	return s.waitGone(ctx, name)
}

// stop stops name and clears a failed state. A unit with a file (the
// bus's) stays loaded; only Stop's transient units are waited out.
func (s *Systemd) stop(ctx context.Context, name string) error {
	done := make(chan string, 1)
	_, err := s.conn.StopUnitContext(ctx, name, "replace", done)
	switch {
	case isDBusError(err, "org.freedesktop.systemd1.NoSuchUnit"):
	case err != nil:
		return fmt.Errorf("StopUnit %s: %w", name, err)
	default:
		if err := s.waitJob(ctx, name, "stop", done); err != nil {
			return err
		}
	}
	if err := s.conn.ResetFailedUnitContext(ctx, name); err != nil && !isDBusError(err, "org.freedesktop.systemd1.NoSuchUnit") {
		return fmt.Errorf("ResetFailedUnit %s: %w", name, err)
	}
	return nil
}

// unloadWait bounds waiting for systemd to collect a stopped unit.
const unloadWait = 10 * time.Second

// waitGone waits until systemd has collected the stopped unit. Until then
// a transient unit's file is still in /run/systemd/transient, and a
// daemon-reload in between (deprovision removing flock.service, a package
// install) loads it again as a unit with a fragment file, which no
// StartTransientUnit may replace. Listing by pattern loads nothing.
func (s *Systemd) waitGone(ctx context.Context, name string) error {
	deadline := time.Now().Add(unloadWait)
	for {
		us, err := s.conn.ListUnitsByPatternsContext(ctx, nil, []string{name})
		if err != nil {
			return fmt.Errorf("ListUnitsByPatterns %s: %w", name, err)
		}
		if len(us) == 0 || time.Now().After(deadline) {
			return nil // collected; or held by something else, as before
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func (s *Systemd) waitJob(ctx context.Context, name, verb string, done <-chan string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s %s: %w", verb, name, ctx.Err())
	case result := <-done:
		if result == "done" {
			return nil
		}
		return fmt.Errorf("%s job of %s: %s%s (see: systemctl status %s; journalctl -u %s)", verb, name, result, s.why(ctx, name), name, name)
	}
}

// why is what systemd knows of a failed unit, for the error message.
func (s *Systemd) why(ctx context.Context, name string) string {
	p, err := s.conn.GetUnitTypePropertiesContext(ctx, name, "Service")
	if err != nil {
		return ""
	}
	return fmt.Sprintf(", result %v, exit status %v", p["Result"], p["ExecMainStatus"])
}

func isDBusError(err error, name string) bool {
	var de dbus.Error
	if errors.As(err, &de) {
		return de.Name == name
	}
	var dep *dbus.Error
	return errors.As(err, &dep) && dep.Name == name
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
