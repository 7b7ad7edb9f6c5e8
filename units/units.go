// Package units owns the systemd side of a flock: the hardened property set
// of each agent's transient unit flock-agent@<id>.service, started and
// stopped over D-Bus.
package units

import (
	"context"
	"errors"
)

// Prefix is the name every agent unit starts with; nothing else is ours.
const Prefix = "flock-agent@"

// Property is one unit property as systemd names it, with a Go value of the
// D-Bus type systemd expects for it.
type Property struct {
	Name  string
	Value any
}

// Unit is a transient unit as flock wants it.
type Unit struct {
	Name        string // flock-agent@3.service
	Description string // ends with the hash, so drift is seen from the host
	Properties  []Property
	Hash        string // of Properties; equal hash, nothing to do
	Build       string // the flock-agent it runs (BuildID; "" unknown), part of Hash
}

// Status is a flock unit as the host has it.
type Status struct {
	Name        string
	ActiveState string // systemd's: active, failed, inactive, activating...
	SubState    string
	Hash        string // parsed from Description; "" if not ours or unknown
	Build       string // the flock-agent build it runs, parsed from Description; "" if not said
	// Restarts and LastExit are filled by Manager.Exit, which only the
	// read-only verbs call (List does not: reading a unit's properties
	// while systemd collects a stopped transient unit can load it again).
	Restarts uint32 // automatic restarts since the unit was started
	LastExit Exit   // how its main process last ended
}

// ErrNotLoaded means systemd has no such unit loaded.
var ErrNotLoaded = errors.New("not loaded (no such unit running or failed)")

// ErrNoSystemd means there is no systemd to talk to.
var ErrNoSystemd = errors.New("no systemd to talk to")

// Manager is the OS boundary of this package. The real one speaks D-Bus to
// systemd; Fake keeps units in memory for planner tests.
type Manager interface {
	// List returns every loaded unit whose name starts with Prefix.
	List(ctx context.Context) ([]Status, error)
	// Exit says how often the named unit restarted and how its main
	// process last ended.
	Exit(ctx context.Context, name string) (restarts uint32, exit Exit)
	// Start starts u as a transient unit, first stopping a unit of the same
	// name, and waits for systemd's job to finish.
	Start(ctx context.Context, u Unit) error
	// Stop stops the named unit and clears a failed state so it is gone.
	// A unit that does not exist is not an error.
	Stop(ctx context.Context, name string) error
	// Properties reads a loaded unit's properties as systemd has them
	// (name -> value as D-Bus decodes it); ErrNotLoaded when it is not.
	Properties(ctx context.Context, name string) (map[string]any, error)
	// ActiveState reads the named unit's ActiveState (active, failed,
	// inactive...) without loading it; ErrNotLoaded when systemd has no
	// such unit (no file, or a transient unit collected).
	ActiveState(ctx context.Context, name string) (string, error)

	// Service reports a static unit of flock's (StaticUnits: BusUnit,
	// ProxyUnit, CountersSocket, CountersTemplate: of a template, its
	// file alone).
	Service(ctx context.Context, name string) (ServiceStatus, error)
	// InstallService writes the unit's file when it differs (then
	// reloads systemd) and enables it (not a template); for BusUnit it
	// first makes the static account BusUser (account.go).
	InstallService(ctx context.Context, name string, content []byte) error
	// OweRestart marks the running unit as owing a restart, before its
	// changed file is installed: Service reports RestartOwed until
	// RestartService (or RemoveService) clears it (owed.go).
	OweRestart(ctx context.Context, name string) error
	// RestartService (re)starts the unit and waits until it is ready
	// (not a template).
	RestartService(ctx context.Context, name string) error
	// ReloadService runs the unit's ExecReload= and waits for it.
	ReloadService(ctx context.Context, name string) error
	// RemoveService stops and disables the unit and deletes its file
	// (and BusUnit's account).
	RemoveService(ctx context.Context, name string) error
	Close()
}
