package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/store"
)

// A multi-host flock: each host's bus is one nats-server of a cluster
// (routes with mutual TLS and a password), JetStream replicated across
// them. See docs/design.md, "Several hosts" and Config.Cluster.

// routePing is how often a route is pinged (see loadCluster).
const routePing = 5 * time.Second

// routeUser is the one user routes authenticate as; the password is the
// flock's (derived from its secret), the certificate the host's.
const routeUser = "flock"

// clusterSetup is what Start reads of the cluster files, once: reloads
// hand nats-server the very same TLS config (a fresh one would differ
// and touch every route), and the files may be gone by then (systemd
// credentials live as long as the service, but serve may be handed
// copies).
type clusterSetup struct {
	opts   server.ClusterOpts
	routes []*url.URL
}

// loadCluster reads cl's files, from dir by base name if dir is set
// (systemd's $CREDENTIALS_DIRECTORY), else from their paths.
func loadCluster(cl *Cluster, dir string) (*clusterSetup, error) {
	path := func(p string) string {
		if dir != "" {
			return filepath.Join(dir, filepath.Base(p))
		}
		return p
	}
	pw, err := os.ReadFile(path(cl.PasswordFile))
	if err != nil {
		return nil, fmt.Errorf("the route password: %w (provision writes it; in a flock.service, LoadCredential= passes it)", err)
	}
	password := strings.TrimSpace(string(pw))
	if password == "" {
		return nil, fmt.Errorf("the route password %s is empty (provision again to rewrite it)", path(cl.PasswordFile))
	}
	// Verify: a route must show a certificate of the flock's CA, both
	// ways. The connecting side checks the other's certificate against
	// the address in its route URL (an IP literal: the host certificate
	// carries the host's address as an IP SAN).
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: path(cl.CertFile), KeyFile: path(cl.KeyFile), CaFile: path(cl.CAFile), Verify: true,
	})
	if err == nil {
		// A route is both client and server: the CA checks the other's
		// certificate both ways (nats-server's config parser does the
		// same for a cluster's tls block; GenTLSConfig alone does not).
		tc.RootCAs = tc.ClientCAs
	}
	if err != nil {
		return nil, fmt.Errorf("the cluster's TLS files (%s, %s, %s): %w (flockctl cluster certs makes them)", path(cl.CAFile), path(cl.CertFile), path(cl.KeyFile), err)
	}
	host, port, err := splitHostPort(cl.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster listen: %w", err)
	}
	cs := &clusterSetup{opts: server.ClusterOpts{
		Name: cl.Name, Host: host, Port: port,
		Username: routeUser, Password: password,
		TLSConfig: tc, TLSTimeout: 5,
		// A host away (rebooting, its machine stopped, cut off) is tried
		// again every second, so that hosts meet again within a second or
		// two of a split's end: backing off (to 30 s, nats-server's
		// ConnectBackoff) kept a host cut off for 30 s from storing tasks
		// 11-16 s after the network healed. Each attempt's failure would
		// be logged: see apply.
		// A route across a split is never closed by the other side:
		// nats-server's default (a ping every 30 s, two unanswered) keeps
		// it, and the interest it carries, up to 90 s, and publishes
		// across it go nowhere unanswered. Pinged every 5 s, it is
		// closed within 15-20 s, and a side cut off from the stream's
		// leader says so (quorum.go).
		PingInterval: routePing,
		MaxPingsOut:  3,
	}}
	for _, r := range cl.Routes {
		cs.routes = append(cs.routes, &url.URL{Scheme: "nats-route", User: url.UserPassword(routeUser, password), Host: r})
	}
	return cs, nil
}

// apply applies the cluster to nats-server's options. JetStream turns
// clustered by itself when routes are set; it needs a server name unique
// in the cluster and the cluster's name.
func (cs *clusterSetup) apply(o *server.Options, name string) {
	o.ServerName = name
	o.Cluster = cs.opts
	o.Routes = cs.routes
	// A route that keeps failing is logged at its first failed attempt
	// and then once a minute, not every second.
	o.ReconnectErrorReports = routeErrorsEvery
}

// routeErrorsEvery: one in this many failed attempts to reach a host
// again is logged.
const routeErrorsEvery = 60

// joinWithStore runs before a clustered server starts: a store this
// host's bus made alone (a flock on one host, now on several) would be
// read by the clustered server and its streams, which the cluster's
// metadata does not know, deleted as orphans 30 s later, queued tasks and
// all (nats-server's checkForOrphans; and until then they hold the
// store's space, so the cluster cannot place its own streams here). So
// the whole store is set aside (store.SetAsideUnclustered) and the server
// starts on an empty one; once the cluster's streams exist, putBack puts
// every task, result and dead letter of it into them (keepEnsured), and
// the tree stays where it is, marked done.
// Started on it, the server would delete its streams: when the store
// cannot be set aside the bus does not start (systemd tries again).
func (s *Server) joinWithStore(now time.Time) error {
	alone, err := store.Unclustered(s.opts.StoreDir)
	if err != nil {
		return fmt.Errorf("looking whether the store was made without a cluster: %w", err)
	}
	if !alone {
		return nil
	}
	aside, err := store.SetAsideUnclustered(s.opts.StoreDir, store.Stamp(now))
	if err != nil {
		return fmt.Errorf("setting aside the store this host's bus made alone, before it joined the cluster (started on it, the cluster would delete its streams): %w", err)
	}
	s.log.Noticef("store: this host's bus made its store alone, before it joined the cluster: set aside in %s; "+
		"its tasks, results and dead letters go into the cluster's streams once they exist", aside)
	return nil
}

// server is this bus's name in a cluster, "" on one host.
func (c Config) server() string {
	if c.Cluster == nil {
		return ""
	}
	return c.Cluster.Server
}

// replicas is how many copies each stream keeps.
func (c Config) replicas() int {
	if c.Cluster == nil {
		return 1
	}
	return c.Cluster.Replicas
}

// local reports whether agent runs on this bus's host: only its host's
// bus serves its desk requests and counts its egress. Every bus hears
// them (the subjects span the cluster), so the others keep quiet.
func (s *Server) local(agent int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.local(agent)
}

// local reports whether c places agent on its own host (every agent, on
// one host).
func (c Config) local(agent int) bool {
	return c.Cluster == nil || c.Cluster.Hosts[agent] == c.Cluster.Server
}

// ensureLater makes the streams and consumers of the config in force in
// the background, trying again until it is done or the bus stops: a
// cluster's JetStream answers only once a majority of its hosts are up
// (and an R3 stream is made only with three), and a bus must take its
// clients at once, whichever host comes up first. Each kind of failure is
// logged once, and the end.
func (s *Server) ensureLater() {
	select {
	case s.ensureKick <- struct{}{}:
	default: // one is pending already; it reads the latest config
	}
}

// attemptTimeout bounds one try: a JetStream request lost while the
// cluster elects its leaders is not answered at all, and three buses
// making the same streams at once lose some. What a try made stays
// made, so a flock with many consumers gets there over several.
const attemptTimeout = 5 * time.Second

func (s *Server) keepEnsured(ctx context.Context) {
	defer close(s.ensureDone)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ensureKick:
		}
		seen := map[string]bool{}
		for attempt := 1; ; attempt++ {
			s.mu.Lock()
			c := s.cfg
			s.mu.Unlock()
			// Without a meta leader every request would wait out its
			// timeout: wait for one first, briefly.
			delay := min(time.Second<<min(attempt-1, 5), 30*time.Second)
			err := errNoMetaLeader
			if s.ns.JetStreamIsCurrent() {
				actx, cancel := context.WithTimeout(ctx, attemptTimeout)
				err = s.setUp(actx, c)
				cancel()
			} else {
				delay, attempt = 200*time.Millisecond, attempt-1
			}
			if err == nil {
				if len(seen) > 0 || !s.ready.Load() {
					s.log.Noticef("the streams and consumers are in place (%d copies each), after %d attempts", c.replicas(), attempt)
				}
				s.ready.Store(true)
				// What a store set aside holds goes into the cluster's
				// streams now that they exist (joinWithStore).
				s.putBack(ctx)
				break
			}
			if ctx.Err() != nil {
				return
			}
			if kind := failureKind(err); !seen[kind] {
				seen[kind] = true
				s.log.Warnf("setting up the streams and consumers: %v (trying again until it works: the cluster may still be forming)", err)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// setUp is startTasks the first time (the dead-letter watch once), then
// ensureTasks.
func (s *Server) setUp(ctx context.Context, c Config) error {
	if s.givenUp == nil {
		return s.startTasks(ctx, c)
	}
	return s.ensureTasks(ctx, c)
}

// failureKind is err without what varies between tries (numbers), so
// the same failure is logged once.
func failureKind(err error) string {
	var b strings.Builder
	for _, r := range err.Error() {
		if r < '0' || r > '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

var errNoMetaLeader = errors.New("JetStream has no meta leader yet (waiting for a majority of the hosts)")

// errNotReady is the desk's answer while the streams are being made.
var errNotReady = errors.New("the bus is still setting up its streams (a cluster forming, or short of a majority of its hosts): ask again")

// describeCluster says what a reload would change of the cluster.
func describeCluster(old, c *Cluster) string {
	switch {
	case old == nil:
		return "one host -> cluster " + c.Server
	case c == nil:
		return "cluster " + old.Server + " -> one host"
	}
	return fmt.Sprintf("server %s, listen %s, routes %v, %d copies -> server %s, listen %s, routes %v, %d copies",
		old.Server, old.Listen, old.Routes, old.Replicas, c.Server, c.Listen, c.Routes, c.Replicas)
}
