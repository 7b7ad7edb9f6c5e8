// Package harness boots throw-away systemd machines for flock's system
// tests (docs/design.md, "Test tiers").
//
// A machine is an overlay of the host's / (so it has the host's packages)
// booted with `systemd-nspawn --boot --private-network`: its own systemd as
// PID 1, its own network namespace with only lo (or one on a private
// network of the test's, net.go), and the project's freshly built binaries
// in /usr/local/bin. Everything lives under
// /var/tmp/flock-harness/<name>/ and is removed by Close; a directory left by
// a crashed run is removed by the next Start.
//
// The host's PID 1 is not systemd, so nspawn cannot register the machine or
// create a scope for it: it runs with --register=no --keep-unit, and the
// machine is entered with nsenter on the PID of its systemd.
package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options says how to boot a machine. The zero value boots one with the
// project's binaries installed.
type Options struct {
	// Name is the machine's name and hostname; default flock-<pid>-<n>,
	// unique among the machines of all processes on the host.
	Name string
	// NoBinaries skips building and installing flockctl, flock-agent and
	// probe, for tests of things that do not need them.
	NoBinaries bool
	// Binaries are more files to install, name in /usr/local/bin -> path
	// on the host. They override the built ones of the same name.
	Binaries map[string]string
	// NspawnArgs are appended to systemd-nspawn's arguments (e.g. --bind=).
	NspawnArgs []string
	// NetworkNamespace is the path of a network namespace the machine
	// joins (Net.Attach) instead of a private one with only lo. It is
	// the caller's: the machine never removes it.
	NetworkNamespace string
	// AuthorizedKeys, when set, makes the machine run sshd on port 22
	// (sshd.go): root may log in with these keys (authorized_keys
	// lines) and nothing else.
	AuthorizedKeys string
	// BootTimeout bounds each boot until `systemctl is-system-running`
	// says running or degraded; default 60 s.
	BootTimeout time.Duration
	// Log receives progress lines (boot and teardown times, failed units);
	// nil discards them. Boot sends them to t.Log.
	Log io.Writer
}

// Machine is one booted systemd machine. Its methods may be called from
// several goroutines, but Reboot, PowerOff, PowerOn and Close not at the
// same time.
type Machine struct {
	instance
	o       Options
	nspawn  string // paths of the tools, resolved once
	nsenter string

	mu     sync.Mutex
	cur    *boot // nil when not running (failed Start, during Reboot, off, closed)
	closed bool  // by Close: never booted again
}

// parentDir holds every machine's directory. Not /tmp: a test binary may
// run with a private /tmp, and the machine's own /tmp is a tmpfs anyway.
const parentDir = "/var/tmp/flock-harness"

const defaultBootTimeout = 60 * time.Second

var seq atomic.Int64

// nameRe keeps names valid as machine names, hostnames and directories.
var nameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}$`)

// Start boots a machine and returns it running. ctx bounds the start only;
// the machine lives until Close. On error nothing is left behind and the
// returned Machine is nil (Close on it is a no-op).
func Start(ctx context.Context, o Options) (*Machine, error) {
	if o.Name == "" {
		o.Name = fmt.Sprintf("flock-%d-%d", os.Getpid(), seq.Add(1))
	}
	if !nameRe.MatchString(o.Name) {
		return nil, fmt.Errorf("harness: machine name %q: want letters, digits and '-', at most 63", o.Name)
	}
	if o.BootTimeout <= 0 {
		o.BootTimeout = defaultBootTimeout
	}
	m := &Machine{instance: instance{name: o.Name, dir: filepath.Join(parentDir, o.Name), dirs: machineDirs, log: o.Log}, o: o}
	if err := m.instance.startOrTearDown(func() error { return m.start(ctx) }, m.Close); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Machine) start(ctx context.Context) error {
	var err error
	if m.nspawn, err = exec.LookPath("systemd-nspawn"); err != nil {
		return fmt.Errorf("%w (apt-get install systemd-container)", err)
	}
	if m.nsenter, err = exec.LookPath("nsenter"); err != nil {
		return err
	}
	bins := map[string]string{}
	if !m.o.NoBinaries {
		if bins, err = projectBinaries(); err != nil {
			return err
		}
	}
	for name, p := range m.o.Binaries {
		bins[name] = p
	}
	if err := m.claim(); err != nil {
		return err
	}
	if err := mountRoot(m.dir); err != nil {
		return err
	}
	if err := prepareRoot(m.rootDir(), m.name, bins); err != nil {
		return err
	}
	if m.o.AuthorizedKeys != "" {
		if err := installSSHD(m.rootDir(), m.o.AuthorizedKeys); err != nil {
			return err
		}
	}
	return m.boot(ctx)
}

// Name is the machine's name (also its hostname).
func (m *Machine) Name() string { return m.name }

// Dir is the machine's directory on the host (upper/, work/, root/,
// console.log).
func (m *Machine) Dir() string { return m.dir }

// PID is the host PID of the machine's systemd (its PID 1), or 0 when it
// is not running. It changes on Reboot.
func (m *Machine) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return m.cur.init.pid
}

// Root is the host path of the machine's / as the machine sees it,
// mounts inside included (/run, /tmp are tmpfs there). Prefer ReadFile and
// WriteFile: an absolute symlink met under Root resolves on the host.
func (m *Machine) Root() string {
	return "/proc/" + strconv.Itoa(m.PID()) + "/root"
}

// rootDir is the overlay's mount point: the machine's / before boot.
func (m *Machine) rootDir() string { return filepath.Join(m.dir, "root") }

// Close powers the machine off and removes everything it left on the
// host: the nspawn process, the overlay mount, the directory. It always
// tries every step, is idempotent, and a nil Machine is fine.
func (m *Machine) Close() error {
	if m == nil {
		return nil
	}
	return m.close(func() error {
		m.mu.Lock()
		b := m.cur
		m.cur = nil
		m.closed = true
		m.mu.Unlock()
		if b == nil {
			return nil
		}
		return m.stop(b)
	})
}
