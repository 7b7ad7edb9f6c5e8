package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/proxyd"
	"github.com/flockrun/flock/spec"
)

func newProxy() *cobra.Command {
	var o proxyd.Options
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
			// flock-proxy.service hands the providers' keys over as credentials.
			o.CredentialsDir = os.Getenv("CREDENTIALS_DIRECTORY")
			// Where provision hands over a changed secret at a reload.
			if dir := os.Getenv("RUNTIME_DIRECTORY"); dir != "" {
				o.HandOverDir = filepath.Join(dir, spec.HandOverDir)
			}
			return proxyd.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.ConfigPath, "config", proxy.ConfigPath, "the proxy config flockctl provision writes")
	cmd.Flags().StringVar(&o.StateDir, "state", "", "where the model gateway keeps its counts (default $STATE_DIRECTORY, else "+proxyd.DefaultStateDir+")")
	cmd.Flags().StringVar(&o.Nkey, "nkey", "", "the proxy's bus seed (flock-proxy.service's credential); none: decisions go to the journal only")
	return cmd
}
