package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/counters"
	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/metrics"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

type serveOpts struct {
	configPath, storeDir string
	debug                bool
}

func newServe() *cobra.Command {
	var o serveOpts
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "Run the flock's bus (the embedded NATS server); flock.service runs this",
		Long: `serve runs the embedded NATS server agents talk through, with one nkey
user per agent and its role's subject permissions, as the config that
flockctl provision writes says. Tasks, results and dead letters are kept
on disk (JetStream) in --store, by default $STATE_DIRECTORY, which
flock.service's StateDirectory= sets. It tells systemd it is ready once the
bus accepts connections and its streams are in place (Type=notify). SIGHUP,
or the operator's request on flock.bus.reload, re-reads the config without
dropping connections. When the config names a metrics address
(the spec's bus.metrics, by default 127.0.0.1:8223), it serves Prometheus
metrics on /metrics there: the bus's figures, the agents' units as
systemd has them, read over the system bus, and the firewall's refused
packets per agent, asked of flock-counters.socket, when scraped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.configPath, "config", bus.ConfigPath, "the bus config flockctl provision writes")
	cmd.Flags().StringVar(&o.storeDir, "store", os.Getenv("STATE_DIRECTORY"), "where tasks and results are kept (default $STATE_DIRECTORY)")
	cmd.Flags().BoolVar(&o.debug, "debug", false, "log every connection and subscription")
	return cmd
}

// runServe runs the bus until ctx ends; its log goes to stderr, the
// journal's.
func runServe(ctx context.Context, o serveOpts) error {
	cfg, err := bus.ReadConfig(o.configPath)
	if err != nil {
		return err
	}
	if o.storeDir == "" {
		return errors.New("no store for tasks and results: give --store DIR, or run under flock.service (StateDirectory= sets $STATE_DIRECTORY)")
	}
	// One read-only D-Bus connection for /metrics and the answers
	// to flock.bus.units (every host's status reads them).
	obs := &units.Observer{}
	defer obs.Close()
	var srv *bus.Server
	reload := func() error {
		c, err := bus.ReadConfig(o.configPath)
		if err != nil {
			return err
		}
		if err := srv.Reload(c); err != nil {
			if errors.Is(err, bus.ErrRestartNeeded) {
				return fmt.Errorf("%w: systemctl restart flock.service", err)
			}
			return err
		}
		fmt.Fprintf(os.Stderr, "[INF] reloaded %s: %d users\n", o.configPath, len(c.Users))
		return nil
	}
	srv, err = bus.Start(cfg, bus.Options{Log: os.Stderr, Debug: o.debug, OnReload: reload, StoreDir: o.storeDir,
		Events: events.Journal{Fallback: os.Stderr}, Units: unitStates{obs},
		// flock.service hands the cluster's files over as credentials
		// (LoadCredential=): the bus's user cannot read root's originals.
		CredentialsDir: os.Getenv("CREDENTIALS_DIRECTORY")})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if cfg.Metrics != "" {
		stop, err := serveMetrics(cfg.Metrics, srv, obs)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serveNotified(ctx, "bus on "+cfg.Listen, nil, reload)
}

// serveMetrics serves /metrics on addr from srv's figures and systemd's
// units, read over the system bus (flock.service has no privileges, so
// not systemd's private socket). A change of addr restarts the bus
// (bus.Config.NeedsRestart): it is bound once, here.
func serveMetrics(addr string, srv *bus.Server, obs *units.Observer) (stop func(), err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "[WRN] "+format+"\n", args...) }
	// The firewall's counters come from flock-counters.socket's reader:
	// the bus has no capability to read nftables with.
	ms, err := metrics.Listen(addr, metrics.Handler(metrics.New(srv, obs, counters.Client{}, logf)))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "[INF] serving %s on %s\n", metrics.Path, addr)
	return func() {
		if err := ms.Close(); err != nil {
			logf("closing %s on %s: %v", metrics.Path, addr, err)
		}
	}, nil
}

// unitStates reads the agents' units for the bus's answers on
// wire.UnitsSubject through the Observer /metrics uses. A stopped unit is
// not asked for its restarts: reading its properties while systemd
// collects it would load it again (as status.WithExit).
type unitStates struct{ obs *units.Observer }

func (u unitStates) States(ctx context.Context, names []string) (map[string]wire.AgentUnit, error) {
	loaded, err := u.obs.List(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]wire.AgentUnit{}
	var running []string
	for _, st := range loaded {
		if !want[st.Name] {
			continue
		}
		out[st.Name] = wire.AgentUnit{Unit: st.Name, ActiveState: st.ActiveState, SubState: st.SubState}
		if st.ActiveState != "inactive" {
			running = append(running, st.Name)
		}
	}
	usage, err := u.obs.Usage(ctx, running)
	for name, us := range usage {
		a := out[name]
		a.Restarts, a.ExitCode, a.ExitStatus = us.Restarts, us.LastExit.Code, us.LastExit.Status
		out[name] = a
	}
	return out, err
}
