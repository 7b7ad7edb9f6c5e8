package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/busd"
)

func newServe() *cobra.Command {
	var o busd.Options
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
			// flock.service hands the cluster's files over as credentials.
			o.CredentialsDir = os.Getenv("CREDENTIALS_DIRECTORY")
			return busd.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.ConfigPath, "config", bus.ConfigPath, "the bus config flockctl provision writes")
	cmd.Flags().StringVar(&o.StoreDir, "store", os.Getenv("STATE_DIRECTORY"), "where tasks and results are kept (default $STATE_DIRECTORY)")
	cmd.Flags().BoolVar(&o.Debug, "debug", false, "log every connection and subscription")
	return cmd
}
