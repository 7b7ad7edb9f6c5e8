package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/debug"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/wire"
)

// connectBus connects as the proxy's bus user, retrying for as long as
// the bus is away (the proxy carries tunnels without it).
func connectBus(url, seed string) (*nats.Conn, error) {
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("the proxy's bus credential %s: %w", seed, err)
	}
	nc, err := nats.Connect(url, opt, nats.Name("flock-proxy"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connecting to the bus at %s: %w", url, err)
	}
	return nc, nil
}

type proxyOpts struct {
	configPath, nkey, stateDir string
}

func newProxy() *cobra.Command {
	var o proxyOpts
	cmd := &cobra.Command{
		Use:   "proxy [--config FILE]",
		Short: "Run the flock's egress proxy; flock-proxy.service runs this",
		Long: `proxy carries the TLS connections of agents with names in their egress
(HTTP CONNECT on loopback). It knows each client by the uid the kernel says
owns its socket, and allows only that agent's names; every decision goes
to the journal with AGENT_ID=, NAME=, PORT=, ADDR=, REASON=, and, given
--nkey (its bus seed), to the bus on flock.egress.<id>. SIGHUP
re-reads the config: new connections follow it, open tunnels go on.

On the same address it serves the model gateway: an agent granted a model
API calls http://127.0.0.1:4230/<provider>/..., and the proxy adds the
provider's key (from $CREDENTIALS_DIRECTORY), checks the grant's limits,
and counts each answer's usage in --state (default $STATE_DIRECTORY), with
each agent's counts on flock.usage.<id>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxy(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.configPath, "config", proxy.ConfigPath, "the proxy config flockctl provision writes")
	cmd.Flags().StringVar(&o.stateDir, "state", "", "where the model gateway keeps its counts (default $STATE_DIRECTORY, else "+defaultProxyState+")")
	cmd.Flags().StringVar(&o.nkey, "nkey", "", "the proxy's bus seed (flock-proxy.service's credential); none: decisions go to the journal only")
	return cmd
}

// runProxy carries the agents' tunnels until ctx ends or the listener
// fails.
func runProxy(ctx context.Context, o proxyOpts) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		// The gateway holds agents' bodies up to gateway.MaxBuffered: the
		// collector keeps the heap near what is live instead of twice it,
		// well under the unit's MemoryHigh.
		debug.SetMemoryLimit(gateway.ProxyMemoryLimit)
	}
	cfg, err := proxy.ReadConfig(o.configPath)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	j := &proxy.Journal{Fallback: os.Stderr}
	models, err := startGateway(cfg, ln.Addr(), o.stateDir, j)
	if err != nil {
		ln.Close()
		return err
	}
	defer models.close()
	if o.nkey != "" && cfg.Bus != "" {
		nc, err := connectBus(cfg.Bus, o.nkey)
		if err != nil {
			return err
		}
		defer nc.Close()
		models.publishTo(nc)
		j.Also = func(r proxy.Record, held int) {
			if b, err := wire.EncodeEgress(r.Event(held)); err == nil {
				// Buffered by the client while the bus is away;
				// the journal has every decision regardless.
				_ = nc.Publish(wire.EgressSubject(r.Agent), b)
			}
		}
	}
	srv := &proxy.Server{UIDs: proxy.SockDiag{}, Resolver: net.DefaultResolver, Record: func(r proxy.Record) { j.Record(r) }, Gateway: models.listener}
	srv.SetPolicy(cfg.Policy)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer ln.Close()
	reload := func() error {
		c, err := proxy.ReadConfig(o.configPath)
		switch {
		case err != nil:
			return fmt.Errorf("%w (the previous policy stays)", err)
		case c.Listen != cfg.Listen:
			return fmt.Errorf("listen changed from %s to %s: systemctl restart flock-proxy.service", cfg.Listen, c.Listen)
		}
		// The grants first: a provider whose key the unit lacks (added
		// since the proxy started) keeps the old policy.
		if err := models.setPolicy(c.Gateway); err != nil {
			return fmt.Errorf("%w (the previous policy stays; a new provider's key reaches the proxy at its restart: systemctl restart flock-proxy.service)", err)
		}
		srv.SetPolicy(c.Policy)
		fmt.Fprintf(os.Stderr, "[INF] reloaded %s: %d agents, %d with model APIs\n", o.configPath, len(c.Policy.Agents), len(c.Gateway.Agents))
		return nil
	}
	return serveNotified(ctx, fmt.Sprintf("proxy on %s for %d agents", cfg.Listen, len(cfg.Policy.Agents)), done, reload)
}
