package plan

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flockrun/flock/units"
)

// Progress is told how many unit starts are done out of total.
type Progress func(done, total int)

// parallelStarts bounds concurrent unit jobs: systemd serialises them
// anyway, but pipelining hides the D-Bus round trips.
const parallelStarts = 8

// Apply carries out p on h, in the order Diff put it.
func Apply(ctx context.Context, h Host, d Desired, p Plan, progress Progress) error {
	var stops, removes, dropIDs []string
	var fixPaths, create, firewall, busConfig, install, startBus, reload bool
	var starts []units.Unit
	unitByName := map[string]units.Unit{}
	for _, u := range d.Units {
		unitByName[u.Name] = u
	}
	for _, c := range p.Changes {
		switch c.Kind {
		case StopUnit:
			stops = append(stops, c.Target)
		case RemoveUser:
			removes = append(removes, c.Target)
		case CreateUser:
			create = true
		case EnsurePath:
			fixPaths = true
		case Firewall:
			firewall = true
		case RemoveIdentity:
			dropIDs = append(dropIDs, c.Target)
		case CreateIdentity, WriteBusConfig:
			busConfig = true
		case InstallBus:
			install = true
		case StartBus:
			startBus = true
		case ReloadBus:
			reload = true
		case StartUnit, RestartUnit:
			starts = append(starts, unitByName[c.Target])
		}
	}

	for _, name := range stops {
		if err := h.Units.Stop(ctx, name); err != nil {
			return fmt.Errorf("stopping %s: %w", name, err)
		}
	}
	if len(removes) > 0 {
		if err := h.Users.RemoveAccounts(ctx, removes); err != nil {
			return fmt.Errorf("removing users: %w", err)
		}
	}
	if create {
		if err := h.Users.EnsureAccounts(ctx, d.Shared, d.Accounts); err != nil {
			return fmt.Errorf("creating users: %w", err)
		}
	}
	if fixPaths {
		if err := h.Users.EnsurePaths(ctx, d.Paths); err != nil {
			return fmt.Errorf("preparing directories: %w", err)
		}
	}
	if len(dropIDs) > 0 {
		if err := h.Bus.Remove(ctx, dropIDs); err != nil {
			return fmt.Errorf("removing bus identities: %w", err)
		}
	}
	if busConfig {
		if err := writeBusConfig(ctx, h, d); err != nil {
			return err
		}
	}
	if install {
		if err := h.Units.InstallService(ctx, d.Service); err != nil {
			return fmt.Errorf("installing %s: %w", units.BusUnit, err)
		}
	}
	switch {
	case startBus:
		if err := h.Units.RestartService(ctx); err != nil {
			return fmt.Errorf("starting the bus: %w", err)
		}
	case reload:
		if err := h.Bus.Reload(ctx); err != nil {
			return fmt.Errorf("reloading the bus: %w", err)
		}
	}
	// Rules go in before any new agent runs, and after removed ones stopped.
	if firewall {
		if err := h.Firewall.Ensure(ctx, d.Policy); err != nil {
			return fmt.Errorf("replacing table inet flock: %w", err)
		}
	}
	return startAll(ctx, h.Units, starts, progress)
}

// writeBusConfig makes sure every identity d needs exists and writes the
// bus config with their keys.
func writeBusConfig(ctx context.Context, h Host, d Desired) error {
	keys := map[string]string{}
	for _, name := range d.Identities {
		pub, _, err := h.Bus.Ensure(ctx, name)
		if err != nil {
			return fmt.Errorf("bus identity %s: %w", name, err)
		}
		keys[name] = pub
	}
	if err := h.Bus.WriteConfig(ctx, d.BusConfig(keys)); err != nil {
		return fmt.Errorf("writing the bus config: %w", err)
	}
	return nil
}

func startAll(ctx context.Context, m units.Manager, us []units.Unit, progress Progress) error {
	if len(us) == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		done int
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, parallelStarts)
	)
	for _, u := range us {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := m.Start(ctx, u)
			mu.Lock()
			defer mu.Unlock()
			done++
			if err != nil {
				errs = append(errs, fmt.Errorf("starting %s: %w", u.Name, err))
			}
			if progress != nil {
				progress(done, len(us))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
