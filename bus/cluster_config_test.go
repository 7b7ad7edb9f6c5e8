package bus

// Tier: unit (no root).

import (
	"strings"
	"testing"
)

// clusterConfig is a valid config of host a of three.
func clusterConfig(t testing.TB) Config {
	c := ForFlock(testFlock(), fixedKeys(t, everyone...))
	c.Cluster = &Cluster{Name: "flock", Server: "a", Listen: "10.77.0.11:6222", Routes: []string{"10.77.0.12:6222", "10.77.0.13:6222"},
		Peers: []string{"b", "c"}, Replicas: 3, Hosts: map[int]string{1: "a", 2: "b", 3: "c"},
		CAFile: "/etc/flock/cluster/ca.crt", CertFile: "/etc/flock/cluster/host.crt", KeyFile: "/etc/flock/cluster/host.key",
		PasswordFile: "/etc/flock/cluster/route.password"}
	return c
}

// TestClusterConfigValidate: each mistake in the cluster is named.
func TestClusterConfigValidate(t *testing.T) {
	t.Parallel()
	if err := clusterConfig(t).validate(); err != nil {
		t.Fatalf("a valid cluster: %v", err)
	}
	for _, tt := range []struct {
		name   string
		change func(*Cluster)
		want   string
	}{
		{"no name", func(c *Cluster) { c.Name = "" }, "cluster: no name"},
		{"server not a host name", func(c *Cluster) { c.Server = "a.b" }, `server "a.b" is not a host name`},
		{"no server", func(c *Cluster) { c.Server = "" }, `server "" is not a host name`},
		{"listen", func(c *Cluster) { c.Listen = "10.77.0.11" }, "listen:"},
		{"route", func(c *Cluster) { c.Routes[1] = "10.77.0.13:0" }, "routes[1]:"},
		{"route twice", func(c *Cluster) { c.Routes[1] = c.Routes[0] }, "routes[1]: 10.77.0.12:6222 appears twice"},
		{"route to itself", func(c *Cluster) { c.Routes[1] = c.Listen }, "or is this host's listen address"},
		{"no replicas", func(c *Cluster) { c.Replicas = 0 }, "replicas 0 is not 1-5"},
		{"more replicas than hosts", func(c *Cluster) { c.Replicas = 4 }, "nor more than the 3 hosts"},
		{"no password file", func(c *Cluster) { c.PasswordFile = "" }, "password_file must all be set"},
		{"no CA file", func(c *Cluster) { c.CAFile = "" }, "ca_file, cert_file"},
		{"bad host", func(c *Cluster) { c.Hosts[2] = "B" }, `agent 2 on "B"`},
		{"a peer short", func(c *Cluster) { c.Peers = c.Peers[:1] }, "peers: 1 names for 2 routes"},
		{"a peer twice", func(c *Cluster) { c.Peers[1] = "b" }, `peers[1]: "b" is not another host's name, or appears twice`},
		{"itself a peer", func(c *Cluster) { c.Peers[0] = "a" }, `peers[0]: "a"`},
		{"a peer not a host name", func(c *Cluster) { c.Peers[0] = "B.x" }, `peers[0]: "B.x"`},
		{"agent without a host", func(c *Cluster) { delete(c.Hosts, 3) }, "agent 3 (a user) has no host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterConfig(t)
			tt.change(c.Cluster)
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestClusterConfigChanges: every cluster field is in the digest; all
// but the agents' hosts need a restart.
func TestClusterConfigChanges(t *testing.T) {
	t.Parallel()
	base := clusterConfig(t)
	if single := ForFlock(testFlock(), fixedKeys(t, everyone...)); !base.NeedsRestart(single) || !single.NeedsRestart(base) || single.Equal(base) {
		t.Error("joining or leaving a cluster must restart the bus")
	}
	for _, tt := range []struct {
		name    string
		change  func(*Cluster)
		restart bool
	}{
		{"name", func(c *Cluster) { c.Name = "other" }, true},
		{"server", func(c *Cluster) { c.Server = "z" }, true},
		{"listen", func(c *Cluster) { c.Listen = "10.77.0.11:7222" }, true},
		{"routes", func(c *Cluster) { c.Routes, c.Peers = c.Routes[:1], c.Peers[:1] }, true},
		{"peers", func(c *Cluster) { c.Peers = []string{"b", "d"} }, true},
		{"replicas", func(c *Cluster) { c.Replicas = 1 }, true},
		{"ca file", func(c *Cluster) { c.CAFile = "/x" }, true},
		{"cert file", func(c *Cluster) { c.CertFile = "/x" }, true},
		{"key file", func(c *Cluster) { c.KeyFile = "/x" }, true},
		{"password file", func(c *Cluster) { c.PasswordFile = "/x" }, true},
		{"an agent moves", func(c *Cluster) { c.Hosts = map[int]string{1: "a", 2: "c", 3: "c"} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterConfig(t)
			tt.change(c.Cluster)
			if c.Equal(base) {
				t.Error("the digest misses the change")
			}
			if got := c.NeedsRestart(base); got != tt.restart {
				t.Errorf("NeedsRestart = %v, want %v", got, tt.restart)
			}
		})
	}
	if c := clusterConfig(t); !c.Equal(base) || c.NeedsRestart(base) {
		t.Error("the same cluster config differs from itself")
	}
}
