package cluster

// Tier: unit (two embedded NATS servers on loopback).

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/spec"
)

// TestNATSRoutesWithTheMaterial: what EnsureAuthority makes and
// RoutePassword derives is what nats-server's routes accept, as the bus
// configures them (mutual TLS verified against ca.crt, user flock): two
// servers, "hosts" 127.0.0.1 and 127.0.0.2, route to each other; a server
// with another flock's certificate, or the wrong password, does not.
func TestNATSRoutesWithTheMaterial(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	hs := []spec.Host{
		{Name: "a", Address: netip.MustParseAddr("127.0.0.1")},
		{Name: "b", Address: netip.MustParseAddr("127.0.0.2")},
	}
	ensure(t, dir, hs, time.Now())
	ensure(t, other, hs, time.Now())
	secret, err := LoadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	pw := RoutePassword(secret)

	a := routed(t, dir, hs[0], pw, nil)
	aRoute := &url.URL{Scheme: "nats-route", User: url.UserPassword("flock", pw), Host: a.ClusterAddr().String()}

	t.Run("a host of the flock joins", func(t *testing.T) {
		b := routed(t, dir, hs[1], pw, aRoute)
		waitRoutes(t, 5*time.Second, true, a, b)
		b.Shutdown()
		b.WaitForShutdown()
		waitRoutes(t, 5*time.Second, false, a)
	})
	for _, tc := range []struct {
		name, dir, pw string
	}{
		{"another flock's certificate is refused", other, pw},
		{"the wrong password is refused", dir, RoutePassword(make([]byte, SecretSize))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &url.URL{Scheme: "nats-route", User: url.UserPassword("flock", tc.pw), Host: aRoute.Host}
			s := routed(t, tc.dir, hs[1], tc.pw, bad)
			// It dials at start, then every second: a second of none is a refusal.
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				if a.NumRoutes() != 0 || s.NumRoutes() != 0 {
					t.Fatalf("routed: a has %d routes, the intruder %d", a.NumRoutes(), s.NumRoutes())
				}
				time.Sleep(50 * time.Millisecond)
			}
			s.Shutdown()
		})
	}
}

// routed starts a server for host h with the material of dir, routing to
// route (nil: none), as the bus does; it stops with the test.
func routed(t *testing.T, dir string, h spec.Host, pw string, route *url.URL) *server.Server {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: filepath.Join(dir, HostsDir, h.Name+".crt"),
		KeyFile:  filepath.Join(dir, HostsDir, h.Name+".key"),
		CaFile:   filepath.Join(dir, CAFile),
		Verify:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// A route dials as much as it accepts: the CA must also verify the
	// server it dials. nats-server's config parser mirrors ClientCAs into
	// RootCAs for a cluster block; a config built in Go must do it itself,
	// or every route fails with "certificate signed by unknown authority".
	tc.RootCAs = tc.ClientCAs
	o := &server.Options{
		ServerName: h.Name, Host: h.Address.String(), Port: -1, NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{
			Name: spec.ClusterName, Host: h.Address.String(), Port: -1,
			Username: "flock", Password: pw, TLSConfig: tc, TLSTimeout: 2,
		},
	}
	if route != nil {
		o.Routes = []*url.URL{route}
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatalf("server %s not ready", h.Name)
	}
	return s
}

// waitRoutes waits until each server has routes (a pool of them, as
// nats-server keeps) or, with routed false, none.
func waitRoutes(t *testing.T, d time.Duration, routed bool, ss ...*server.Server) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := true, ""
		for _, s := range ss {
			n := s.NumRoutes()
			ok = ok && (n > 0) == routed
			state += fmt.Sprintf(" %s:%d", s.Name(), n)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("routes: want routed %v, have%s", routed, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
