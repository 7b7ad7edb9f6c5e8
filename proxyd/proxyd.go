// Package proxyd is flock-proxy, what flock-proxy.service runs (flockctl
// proxy): the egress proxy of package proxy on the config provision
// writes, with the model gateway (package gateway) on the same address,
// its counts kept on disk and published on the bus with the proxy's
// decisions; SIGHUP reloads both policies.
package proxyd

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"runtime/debug"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/internal/sdnotify"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/wire"
)

// Options are what flock-proxy.service gives the proxy.
type Options struct {
	ConfigPath string // proxy.ConfigPath, as provision writes it
	// StateDir is where the gateway keeps its counts; "": the unit's
	// $STATE_DIRECTORY, else DefaultStateDir.
	StateDir string
	// Nkey is the proxy's bus seed (a file); "": decisions go to the
	// journal only, and counts stay on disk.
	Nkey string
	// CredentialsDir holds the providers' keys and CAs, the secrets'
	// files and their CA (the unit's LoadCredential=,
	// $CREDENTIALS_DIRECTORY).
	CredentialsDir string
	// HandOverDir is where root hands over a rotated credential (a
	// secret's, a model API's key or CA) at a reload (the unit's
	// $RUNTIME_DIRECTORY/spec.HandOverDir); "": none.
	HandOverDir string
	// UIDs says which uid owns a client's socket; nil: the kernel's
	// answer (proxy.SockDiag).
	UIDs proxy.UIDOf

	// roots verify the secrets' upstreams and resolver resolves the
	// names agents ask for; nil: the system's. Only this package's tests
	// set them.
	roots    *x509.CertPool
	resolver proxy.Resolver
}

func warn(format string, args ...any) { fmt.Fprintf(os.Stderr, "[WRN] "+format+"\n", args...) }

// Service is the running proxy and its gateway.
type Service struct {
	o      Options
	cfg    proxy.Config // as started: its Listen is bound
	ln     net.Listener
	models *modelGateway
	nc     *nats.Conn // nil: no bus
	srv    *proxy.Server
	done   chan error
	creds  credentials // as the policy in force read them
}

// Run carries the agents' tunnels and serves the gateway until ctx ends
// or the listener fails, telling systemd it is ready; SIGHUP reloads.
func Run(ctx context.Context, o Options) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		// The gateway holds agents' bodies up to gateway.MaxBuffered: the
		// collector keeps the heap near what is live instead of twice it,
		// well under the unit's MemoryHigh.
		debug.SetMemoryLimit(gateway.ProxyMemoryLimit)
	}
	s, err := Start(o)
	if err != nil {
		return err
	}
	defer s.Close()
	return sdnotify.Serve(ctx, fmt.Sprintf("proxy on %s for %d agents", s.cfg.Listen, len(s.cfg.Policy.Agents)), s.done, s.Reload)
}

// Start reads the config, binds its address and serves there: CONNECT
// tunnels and, on the other connections, the gateway.
func Start(o Options) (*Service, error) {
	if o.UIDs == nil {
		o.UIDs = proxy.SockDiag{}
	}
	cfg, err := proxy.ReadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	cr := credentials{dir: o.CredentialsDir}
	ic, err := loadIntercept(cr, cfg, warn)
	if err != nil {
		return nil, err
	}
	if err := makeHandOver(o.HandOverDir); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s := &Service{o: o, cfg: cfg, ln: ln, done: make(chan error, 1), creds: cr}
	j := &proxy.Journal{Fallback: os.Stderr}
	if s.models, err = startGateway(cfg, cr, ln.Addr(), o, j); err != nil {
		ln.Close()
		return nil, err
	}
	if o.Nkey != "" && cfg.Bus != "" {
		if s.nc, err = connectBus(cfg.Bus, o.Nkey); err != nil {
			s.Close()
			return nil, err
		}
		s.models.publishTo(s.nc)
		// Workers' requests are charged to the tasks they hold.
		s.models.gw.Leases = busLeases{s.nc}
		if err := answerSpends(s.nc, s.models.gw); err != nil {
			s.Close()
			return nil, err
		}
		nc := s.nc
		j.Also = func(r proxy.Record, held int) {
			if b, err := wire.EncodeEgress(r.Event(held)); err == nil {
				// Buffered by the client while the bus is away;
				// the journal has every decision regardless.
				_ = nc.Publish(wire.EgressSubject(r.Agent), b)
			}
		}
	}
	if o.resolver == nil {
		o.resolver = net.DefaultResolver
	}
	s.srv = &proxy.Server{UIDs: o.UIDs, Resolver: o.resolver, Record: func(r proxy.Record) { j.Record(r) }, Gateway: s.models.listener, Roots: o.roots}
	s.srv.SetPolicy(cfg.Policy)
	s.srv.SetIntercept(ic)
	s.models.start(s.srv.SecretCounts)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the proxy listens on.
func (s *Service) Addr() net.Addr { return s.ln.Addr() }

// Reload re-reads the config: new connections and requests follow it,
// open tunnels go on. A config the proxy cannot follow without a restart
// leaves the previous policy.
func (s *Service) Reload() error {
	taken := handedOver(s.o.HandOverDir, warn)
	c, err := proxy.ReadConfig(s.o.ConfigPath)
	switch {
	case err != nil:
		return fmt.Errorf("%w (the previous policy stays)", err)
	case c.Listen != s.cfg.Listen:
		return fmt.Errorf("listen changed from %s to %s: systemctl restart flock-proxy.service", s.cfg.Listen, c.Listen)
	}
	// The credentials (the secrets', the model APIs' keys and CAs) are
	// those the unit was started with, or handed over since.
	cr := s.creds.with(taken)
	ic, err := loadIntercept(cr, c, warn)
	if err != nil {
		return fmt.Errorf("%w (the previous policy stays)", err)
	}
	// Then the grants: a provider whose key neither systemd nor root
	// handed it (added since it started) keeps the old policy.
	if err := s.models.setPolicy(c, cr); err != nil {
		return fmt.Errorf("%w (the previous policy stays; flockctl provision hands a new provider's key over)", err)
	}
	// The secrets first: a grant taken away is no longer intercepted
	// before the policy changes (egress, a plain tunnel's, stays).
	s.srv.SetIntercept(ic)
	s.srv.SetPolicy(c.Policy)
	s.creds = cr
	removeTaken(s.o.HandOverDir, taken, warn)
	fmt.Fprintf(os.Stderr, "[INF] reloaded %s: %d agents, %d with model APIs, %d with secrets\n", s.o.ConfigPath, len(c.Policy.Agents), len(c.Gateway.Agents), len(ic.Agents))
	return nil
}

// Close stops listening, leaves the bus, and stops the gateway, which
// keeps its counts.
func (s *Service) Close() error {
	s.ln.Close()
	if s.nc != nil {
		s.nc.Close()
	}
	return s.models.close()
}

// connectBus connects as the proxy's bus user, retrying for as long as
// the bus is away (the proxy carries tunnels without it).
func connectBus(url, seed string) (*nats.Conn, error) {
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("the proxy's bus credential %s: %w", seed, err)
	}
	nc, err := nats.Connect(url, opt, nats.Name("flock-proxy"), nats.CustomInboxPrefix(wire.ProxyInbox), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connecting to the bus at %s: %w", url, err)
	}
	return nc, nil
}
