package plan

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/spec"
)

// Site is which host of a flock a plan is for. On one host it is the zero
// Site: every agent is this host's. In a multi-host flock this host
// provisions users for every agent (the same uid everywhere) but
// directories, seeds, units and firewall rules for its own agents only,
// and its bus lists every agent with the key derived from the flock's
// secret.
type Site struct {
	Host string // this host's name in the spec ("" on one host)
	// Keys are every agent's public key, derived from the cluster secret
	// (creds.AgentKeys): remote agents have no seed here, and a local
	// agent's seed on disk must be this one. Nil on one host.
	Keys map[string]string
}

// The cluster's files on each host (cluster.Dir, root 0700): the CA and
// this host's certificate and key, made by flockctl cluster certs (or the
// Ansible role) and copied here; the flock's secret; and the route
// password provision derives from it. flock.service loads the four the
// bus reads as credentials.
var (
	ClusterCA       = filepath.Join(cluster.Dir, cluster.CAFile)
	ClusterCert     = filepath.Join(cluster.Dir, cluster.CertFile)
	ClusterKey      = filepath.Join(cluster.Dir, cluster.KeyFile)
	ClusterPassword = filepath.Join(cluster.Dir, cluster.RoutePasswordFile)
)

// ClusterCredentials are the files flock.service hands the bus as
// systemd credentials in a multi-host flock.
var ClusterCredentials = []string{ClusterCA, ClusterCert, ClusterKey, ClusterPassword}

// local is the part of f this host runs: f with only its own agents.
func local(f *spec.Flock, host string) *spec.Flock {
	if !f.Clustered() {
		return f
	}
	l := *f
	l.Agents = f.On(host)
	return &l
}

// clusterConfig is how this host's bus meets the others': nil on one host.
func clusterConfig(f *spec.Flock, host string) *bus.Cluster {
	if !f.Clustered() {
		return nil
	}
	port := strconv.Itoa(f.Bus.ClusterPort)
	c := &bus.Cluster{
		Name: spec.ClusterName, Server: host, Replicas: f.Replicas(), Routes: []string{}, Hosts: map[int]string{},
		CAFile: ClusterCA, CertFile: ClusterCert, KeyFile: ClusterKey, PasswordFile: ClusterPassword,
	}
	for _, h := range f.Hosts {
		addr := net.JoinHostPort(h.Address.String(), port)
		if h.Name == host {
			c.Listen = addr
		} else {
			c.Routes = append(c.Routes, addr)
			c.Peers = append(c.Peers, h.Name)
		}
	}
	slices.Sort(c.Routes)
	slices.Sort(c.Peers)
	for _, a := range f.Agents {
		c.Hosts[a.ID] = a.Host
	}
	return c
}
