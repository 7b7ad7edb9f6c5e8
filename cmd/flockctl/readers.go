package main

// The read-only verbs (status, usage, events, tasks, explain ID) run as
// root, or by a member of the readers' group (spec.ReadersGroup): then
// they connect to the bus as the reader, read systemd over the system
// bus, and skip what only root can read, saying once what they skipped.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// errNotReader is what one who is neither root nor in the readers' group
// is told.
var errNotReader = errors.New("add yourself to " + spec.ReadersGroup + " (sudo usermod -aG " + spec.ReadersGroup + " $USER, then log in again) or use sudo")

// errNeedsRoot is what a reader cannot read.
var errNeedsRoot = errors.New("needs root")

// asReader says whether this flockctl reads the flock as a member of the
// readers' group (true) or as root (false); anyone else is refused.
func asReader() (bool, error) {
	if os.Geteuid() == 0 {
		return false, nil
	}
	return true, canRead(spec.CredPath(creds.ReaderName), plan.StatePath)
}

// canRead says why one who is not root cannot read the flock through the
// reader's credential cred and the state: nil when it can.
func canRead(cred, state string) error {
	f, err := os.Open(cred)
	switch {
	case err == nil:
		f.Close()
		return nil
	case errors.Is(err, fs.ErrPermission):
		return errNotReader
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the reader's credential: %w", err)
	}
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%s is absent); run flockctl provision first", plan.ErrNoState, state)
	}
	return fmt.Errorf("the reader's credential %s is absent: provision again as root, with this flockctl, to make it (or use sudo)", cred)
}

// readBus is the host's bus as the reader or (root) the operator.
func readBus(reader bool) *bus.System {
	if reader {
		return bus.NewReader()
	}
	return bus.NewSystem()
}

// readConn connects to the bus as the reader or (root) the operator.
func readConn(reader bool) func(context.Context) (*nats.Conn, error) {
	if reader {
		return bus.NewReader().Operator
	}
	return operatorConn
}

// openReader is openHost for a member of the readers' group: systemd over
// the system bus, the bus as the reader, and no firewall (rootsFirewall).
func openReader(ctx context.Context) (h plan.Host, uo units.Options, close func(), err error) {
	m, uo, err := connectUnits(ctx, units.ConnectReader)
	if err != nil {
		return h, uo, nil, err
	}
	h = plan.Host{Users: users.NewHost(), Units: m, Firewall: rootsFirewall{}, Bus: bus.NewReader(), Proxy: proxy.NewSystem()}
	return h, uo, m.Close, nil
}

// setUpRead is setUpInstalled for status: as root, observed and planned;
// as a reader, what it may read (plan.ReadRunning) with no drift, which
// it says once on errOut.
func setUpRead(ctx context.Context, f *spec.Flock, reader bool, errOut io.Writer) (*onHost, error) {
	if !reader {
		return setUpInstalled(ctx, f, false)
	}
	h, uo, closeHost, err := openReader(ctx)
	if err != nil {
		return nil, err
	}
	s := &onHost{host: h, opts: uo, close: closeHost}
	if s.have, err = plan.ReadRunning(ctx, h); err != nil {
		closeHost()
		return nil, err
	}
	fmt.Fprintf(errOut, "drift and the firewall's refusals not checked: %v (the firewall, the credentials and the agents' files are root's)\n", errNeedsRoot)
	return s, nil
}

// rootsFirewall is table inet flock to a reader: only root reads it.
// Refused counts none, so status leaves the column at zero and says
// once (setUpRead) that it did not read it; explain names what it could
// not read.
type rootsFirewall struct{}

var _ netpolicy.Firewall = rootsFirewall{}

func (rootsFirewall) Ensure(context.Context, netpolicy.Policy) error { return errNeedsRoot }
func (rootsFirewall) Remove(context.Context) error                   { return errNeedsRoot }
func (rootsFirewall) Matches(context.Context, netpolicy.Policy) (bool, error) {
	return false, errNeedsRoot
}
func (rootsFirewall) Current(context.Context) (string, bool, error) { return "", false, errNeedsRoot }
func (rootsFirewall) RulesFor(context.Context, uint32) ([]string, error) {
	return nil, errNeedsRoot
}
func (rootsFirewall) Refused(context.Context) (map[uint32]netpolicy.Refusals, error) {
	return nil, nil
}
