package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
)

// where is the host of a flock a verb works on, and the flock's secret
// (both empty on one host).
type where struct {
	site   plan.Site
	secret []byte
	// makeKey: setUp makes the secrets' placeholder key when it is
	// missing (provision, reconcile: what changes the host).
	makeKey bool
}

// hostFlagHelp is --host's help, the same on every verb that takes it.
const hostFlagHelp = "which of the spec's hosts this is (default: the one whose address this machine has)"

// whereFor resolves which host of f this machine is: name (--host) if
// given, else the name the installed bus config records (installed: for
// verbs that work on what was provisioned), else the host whose address
// is one of this machine's. In a multi-host flock it also reads the
// cluster's secret; missing cluster material is refused here, before
// anything is touched.
func whereFor(f *spec.Flock, name string, installed bool) (where, error) {
	if !f.Clustered() {
		return where{}, oneHost(f, name)
	}
	if name == "" && installed {
		name = installedHost(bus.ConfigPath)
	}
	if name == "" {
		addrs, err := proxy.HostAddrs()
		if err != nil {
			return where{}, fmt.Errorf("finding which host this is: %w; name it with --host", err)
		}
		if name, err = hostOf(f, addrs); err != nil {
			return where{}, err
		}
	}
	if err := spreadHost(f, name); err != nil {
		return where{}, err
	}
	secret, err := clusterMaterial(cluster.Dir)
	if err != nil {
		// The host is known: a dry run may plan without the material.
		return where{site: plan.Site{Host: name}}, err
	}
	names := make([]string, len(f.Agents))
	for i, a := range f.Agents {
		names[i] = spec.UserName(a.ID)
	}
	keys, err := creds.AgentKeys(secret, names)
	if err != nil {
		return where{}, err
	}
	return where{site: plan.Site{Host: name, Keys: keys}, secret: secret}, nil
}

// oneHost refuses a --host for a flock on one host, unless the spec
// lists it.
func oneHost(f *spec.Flock, name string) error {
	if _, ok := f.HostNamed(name); name != "" && !ok {
		return fmt.Errorf("--host %s: the spec lists no such host, and one host needs none; drop --host", name)
	}
	return nil
}

// spreadHost refuses a host name a flock on several hosts does not list.
func spreadHost(f *spec.Flock, name string) error {
	if _, ok := f.HostNamed(name); !ok {
		return fmt.Errorf("--host %s: not one of the spec's hosts; choose %s", name, hostNames(f))
	}
	return nil
}

// hostOf is the host of f whose address is one of addrs: exactly one.
func hostOf(f *spec.Flock, addrs []netip.Addr) (string, error) {
	var found []string
	for _, h := range f.Hosts {
		for _, a := range addrs {
			if a == h.Address {
				found = append(found, h.Name)
				break
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("none of the spec's hosts (%s) has an address of this machine; name this one with --host NAME", hostList(f))
	}
	return "", fmt.Errorf("this machine has the addresses of several of the spec's hosts (%s); name this one with --host NAME", strings.Join(found, ", "))
}

// thisHostOf is the host of f whose address this machine has, as
// provision tells it; "" when none or several have, or the addresses
// cannot be read.
func thisHostOf(f *spec.Flock) string {
	addrs, err := proxy.HostAddrs()
	if err != nil {
		return ""
	}
	h, _ := hostOf(f, addrs)
	return h
}

// installedHost is the host name the installed bus config records ("" on
// one host, or when there is none).
func installedHost(path string) string {
	c, err := bus.ReadConfig(path)
	if err != nil || c.Cluster == nil {
		return ""
	}
	return c.Cluster.Server
}

func hostNames(f *spec.Flock) string {
	names := make([]string, len(f.Hosts))
	for i, h := range f.Hosts {
		names[i] = h.Name
	}
	return strings.Join(names, ", ")
}

func hostList(f *spec.Flock) string {
	parts := make([]string, len(f.Hosts))
	for i, h := range f.Hosts {
		parts[i] = h.Name + " " + h.Address.String()
	}
	return strings.Join(parts, ", ")
}

// errNoMaterial is a host of a multi-host flock without its cluster
// material (yet: a first `ansible-playbook --check` has not copied it).
var errNoMaterial = errors.New("a flock on several hosts needs its cluster material")

// clusterMaterial checks that dir holds what a host of a multi-host flock
// needs (flockctl cluster certs makes it, the Ansible role copies it) and
// returns the flock's secret.
func clusterMaterial(dir string) ([]byte, error) {
	files := []string{cluster.CAFile, cluster.CertFile, cluster.KeyFile, cluster.SecretFile}
	var missing []string
	for _, name := range files {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s lacks %s: make it once with flockctl cluster certs -f SPEC --dir DIR, then copy DIR/ca.crt, DIR/secret and DIR/hosts/NAME.crt and NAME.key of this host to %s/ as ca.crt, secret, host.crt and host.key (root, 0600, the directory 0700); or let the Ansible role (ansible/site.yml) do both",
			errNoMaterial, dir, strings.Join(missing, ", "), dir)
	}
	return cluster.LoadSecret(dir)
}

// routePassword writes the route password derived from secret to path
// (root, 0600), unless dryRun, and reports whether it changed: a running
// bus then restarts, as it reads the password once, at start.
func routePassword(path string, secret []byte, dryRun bool) (bool, error) {
	want := []byte(cluster.RoutePassword(secret) + "\n")
	got, err := os.ReadFile(path)
	if dryRun {
		return !bytes.Equal(got, want), nil
	}
	if err == nil && bytes.Equal(got, want) {
		if err := os.Chmod(path, 0o600); err != nil {
			return false, fmt.Errorf("making %s root's alone: %w", path, err)
		}
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading the route password: %w", err)
	}
	if err := renameio.WriteFile(path, want, 0o600, renameio.WithStaticPermissions(0o600)); err != nil {
		return false, fmt.Errorf("writing the route password: %w", err)
	}
	return true, nil
}
