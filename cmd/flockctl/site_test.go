package main

// Tier: unit. Which host of a multi-host flock this machine is, its
// cluster material, and the files serve reads as credentials.

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/spec"
)

const twoHosts = "hosts: [{name: a, address: 10.77.0.11}, {name: b, address: \"fd00::12\"}]\ndefaults: {host: a}\nagents: [{id: 1}, {id: 2, host: b}]\n"

func TestHostOfMatchesThisMachinesAddresses(t *testing.T) {
	f, err := spec.Parse([]byte(twoHosts))
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		addrs []netip.Addr
		host  string
		err   string
	}{
		{"a's address", addrs("127.0.0.1", "10.77.0.11"), "a", ""},
		{"b's v6 address", addrs("::1", "fd00::12"), "b", ""},
		{"none", addrs("127.0.0.1", "192.0.2.1"), "", "none of the spec's hosts (a 10.77.0.11, b fd00::12) has an address of this machine; name this one with --host NAME"},
		{"both", addrs("10.77.0.11", "fd00::12"), "", "this machine has the addresses of several of the spec's hosts (a, b); name this one with --host NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, err := hostOf(f, tc.addrs)
			if host != tc.host || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("hostOf = %q, %v; want %q, %s", host, err, tc.host, tc.err)
			}
		})
	}
	if _, err := whereFor(f, "z", false); err == nil || !strings.Contains(err.Error(), "--host z: not one of the spec's hosts; choose a, b") {
		t.Errorf("--host z: %v", err)
	}
	one, _ := spec.Parse([]byte("agents: [{id: 1}]\n"))
	if w, err := whereFor(one, "", false); err != nil || w.site.Host != "" || w.site.Keys != nil {
		t.Errorf("one host: %+v, %v", w, err)
	}
	if _, err := whereFor(one, "a", false); err == nil || !strings.Contains(err.Error(), "drop --host") {
		t.Errorf("--host on one host: %v", err)
	}
}

func TestMissingClusterMaterialNamesTheFix(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := clusterMaterial(dir)
	if !errors.Is(err, errNoMaterial) {
		t.Errorf("error %v is not errNoMaterial (a dry run goes on without it)", err)
	}
	for _, want := range []string{"lacks host.crt, host.key, secret", "flockctl cluster certs -f SPEC --dir DIR", "Ansible role"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	for _, name := range []string{"host.crt", "host.key"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := clusterMaterial(dir); err != nil || !bytes.Equal(s, bytes.Repeat([]byte{0xab}, 32)) {
		t.Errorf("secret %x, %v", s, err)
	}
}

func TestRoutePasswordIsWrittenOnce(t *testing.T) {
	secretS := bytes.Repeat([]byte{1}, 32)
	path := filepath.Join(t.TempDir(), "route.password")
	if changed, err := routePassword(path, secretS, true); err != nil || !changed {
		t.Errorf("dry run: changed %v, %v", changed, err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a dry run wrote the password")
	}
	if changed, err := routePassword(path, secretS, false); err != nil || !changed {
		t.Errorf("first: changed %v, %v", changed, err)
	}
	data, _ := os.ReadFile(path)
	if fi, _ := os.Stat(path); fi.Mode() != 0o600 || string(data) != cluster.RoutePassword(secretS)+"\n" || len(data) != 65 {
		t.Errorf("password file %v %q", fi.Mode(), data)
	}
	if changed, err := routePassword(path, secretS, false); err != nil || changed {
		t.Errorf("second: changed %v, %v", changed, err)
	}
	if changed, _ := routePassword(path, bytes.Repeat([]byte{2}, 32), false); !changed {
		t.Error("a new secret did not change the password")
	}
}
