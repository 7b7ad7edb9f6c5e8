package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/spec"
)

func newCluster() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Make the material the hosts of a multi-host flock share",
		Long: `cluster holds the verbs of a multi-host flock (a spec with hosts:). See
flockctl cluster certs.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterCerts())
	return cmd
}

type clusterCertsOpts struct {
	stdio
	file, dir string
}

func newClusterCerts() *cobra.Command {
	var o clusterCertsOpts
	cmd := &cobra.Command{
		Use:   "certs -f FILE [--dir DIR]",
		Short: "Make or renew the flock's CA, secret and each host's certificate (idempotent)",
		Long: `certs keeps the cluster authority of a multi-host flock in DIR, on one
machine (the Ansible role runs it on the first host of the play):

  DIR/secret, DIR/ca.crt, DIR/ca.key   made once (the CA anew only when
                                       it is gone or ends within 30 days)
  DIR/hosts/NAME.crt, NAME.key         for each host of the spec that lacks
                                       a good one: missing, not for its name
                                       and address, ending within 30 days,
                                       or not signed by the CA

It prints the path of each file it made, one a line, and nothing when
nothing was due. ECDSA P-256; the CA lasts 10 years, hosts 2 years.
Keys and the secret are 0600, certificates 0644, directories 0700.

Each host then needs, in ` + cluster.Dir + ` (root, 0700):
  ca.crt, secret            the same on every host (from DIR)
  host.crt, host.key        its own, from DIR/hosts/NAME.crt and NAME.key
The CA key stays in DIR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdio = stdioOf(cmd)
			return runClusterCerts(o, time.Now())
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "the flock spec (flock.yaml), with hosts:")
	cmd.Flags().StringVar(&o.dir, "dir", cluster.AuthorityDir, "the authority's directory (keeps the CA key)")
	return cmd
}

func runClusterCerts(o clusterCertsOpts, now time.Time) error {
	if o.file == "" {
		return errors.New("no spec: give -f FILE, the multi-host flock's spec (with hosts:)")
	}
	f, err := spec.Load(o.file)
	if err != nil {
		return err
	}
	return clusterCerts(o.out, f, o.file, o.dir, now)
}

// clusterCerts ensures the authority of f's hosts in dir and prints each
// file it made.
func clusterCerts(out io.Writer, f *spec.Flock, file, dir string, now time.Time) error {
	if !f.Clustered() {
		return fmt.Errorf("%s lists %d host(s): cluster certificates are for a flock on two or more hosts; list them under hosts: (name and address each), or, on one host, provision without them", file, len(f.Hosts))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	made, err := cluster.EnsureAuthority(abs, f.Hosts, now)
	for _, p := range made {
		fmt.Fprintln(out, p)
	}
	return err
}
