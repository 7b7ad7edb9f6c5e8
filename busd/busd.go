// Package busd is flock's bus service, what flock.service runs (flockctl
// serve): the embedded NATS server of package bus, started from the config
// provision writes and reloaded from it; the answers to flock.bus.units
// read from systemd; and, when the config names an address, /metrics
// (package metrics) on it.
package busd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/counters"
	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/internal/sdnotify"
	"github.com/flockrun/flock/metrics"
	"github.com/flockrun/flock/units"
)

// Options are what flock.service gives the bus: the config and where
// tasks and results are kept.
type Options struct {
	ConfigPath string // bus.ConfigPath, as provision writes it
	StoreDir   string // tasks, results, dead letters: the unit's StateDirectory=
	Debug      bool   // log every connection and subscription
	// CredentialsDir holds the cluster's files (the unit's
	// LoadCredential=: the bus's user cannot read root's originals); "":
	// read them from the config's paths.
	CredentialsDir string
	// Units are the agents' units as systemd has them, for /metrics and
	// flock.bus.units; nil: a units.Observer on the system bus.
	Units metrics.Units
	// Firewall is the agents' refused packets, for /metrics; nil:
	// flock-counters.socket's reader (counters.Client).
	Firewall metrics.Firewall
}

// Service is the running bus.
type Service struct {
	o       Options
	listen  string
	srv     *bus.Server
	metrics *metrics.Server // nil: no /metrics
	closers []func()        // run at Close, the last first (as defers)
}

// Run runs the bus until ctx ends, telling systemd it is ready once the
// bus accepts connections and its streams are in place; SIGHUP reloads.
func Run(ctx context.Context, o Options) error {
	s, err := Start(o)
	if err != nil {
		return err
	}
	defer s.Close()
	return sdnotify.Serve(ctx, "bus on "+s.listen, nil, s.Reload)
}

// Start reads the config and starts the bus, and /metrics if the config
// names its address. Its log goes to stderr, the journal's.
func Start(o Options) (*Service, error) {
	cfg, err := bus.ReadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	if o.StoreDir == "" {
		return nil, errors.New("no store for tasks and results: give --store DIR, or run under flock.service (StateDirectory= sets $STATE_DIRECTORY)")
	}
	s := &Service{o: o, listen: cfg.Listen}
	if s.o.Units == nil {
		// One read-only D-Bus connection for /metrics and the answers
		// to flock.bus.units (every host's status reads them).
		obs := &units.Observer{}
		s.o.Units = obs
		s.closers = append(s.closers, func() { obs.Close() })
	}
	if s.o.Firewall == nil {
		// The bus has no capability to read nftables with.
		s.o.Firewall = counters.Client{}
	}
	s.srv, err = bus.Start(cfg, bus.Options{Log: os.Stderr, Debug: o.Debug, OnReload: s.Reload, StoreDir: o.StoreDir,
		Events: events.Journal{Fallback: os.Stderr}, Units: unitStates{s.o.Units}, CredentialsDir: o.CredentialsDir})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.closers = append(s.closers, s.srv.Shutdown)
	if cfg.Metrics != "" {
		if err := s.serveMetrics(cfg.Metrics); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Reload re-reads the config; the connections stay. What cannot change
// without a restart is refused, naming the restart.
func (s *Service) Reload() error {
	c, err := bus.ReadConfig(s.o.ConfigPath)
	if err != nil {
		return err
	}
	if err := s.srv.Reload(c); err != nil {
		if errors.Is(err, bus.ErrRestartNeeded) {
			return fmt.Errorf("%w: systemctl restart flock.service", err)
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "[INF] reloaded %s: %d users\n", s.o.ConfigPath, len(c.Users))
	return nil
}

// ClientURL is where clients reach the bus.
func (s *Service) ClientURL() string { return s.srv.ClientURL() }

// MetricsAddr is where /metrics is served; nil: nowhere.
func (s *Service) MetricsAddr() net.Addr {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.Addr()
}

// Close stops /metrics, then the bus, and lets go of systemd.
func (s *Service) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// serveMetrics serves /metrics on addr from the bus's figures and
// systemd's units, read over the system bus (flock.service has no
// privileges, so not systemd's private socket), and the firewall's
// counters, asked of flock-counters.socket's reader. A change of addr
// restarts the bus (bus.Config.NeedsRestart): it is bound once, here.
func (s *Service) serveMetrics(addr string) error {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "[WRN] "+format+"\n", args...) }
	ms, err := metrics.Listen(addr, metrics.Handler(metrics.New(s.srv, s.o.Units, s.o.Firewall, logf)))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[INF] serving %s on %s\n", metrics.Path, addr)
	s.metrics = ms
	s.closers = append(s.closers, func() {
		if err := ms.Close(); err != nil {
			logf("closing %s on %s: %v", metrics.Path, addr, err)
		}
	})
	return nil
}
