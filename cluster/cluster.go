// Package cluster is the material the buses of a multi-host flock share:
// the flock's certificate authority, each host's certificate, and one
// flock-wide secret from which the route password and every agent's nkey
// seed are derived, so no second secret ever travels.
//
// On a host it lives in Dir; the authority that makes it (EnsureAuthority,
// behind `flockctl cluster certs`) keeps the CA key in a directory of its
// own on one machine.
package cluster

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is where a host keeps its cluster material (root, 0700).
const Dir = "/etc/flock/cluster"

// AuthorityDir is where `flockctl cluster certs` keeps the authority (the
// CA's key, the secret, every host's pair) by default: the Ansible role
// keeps it there on the first host of the play.
const AuthorityDir = "/var/lib/flock/cluster-authority"

// The files of Dir. The bus config points at them, and flock.service
// loads them as credentials by these names.
const (
	CAFile            = "ca.crt"         // the flock's CA certificate
	CertFile          = "host.crt"       // this host's certificate, signed by the CA
	KeyFile           = "host.key"       // its private key
	SecretFile        = "secret"         // 32 random bytes, hex, the same on every host
	RoutePasswordFile = "route.password" // derived from the secret by provision
)

// The authority's own files, beside its secret and CA certificate (named
// as in Dir): the CA key, and per host HostsDir/<name>.crt and .key.
const (
	CAKeyFile = "ca.key"
	HostsDir  = "hosts"
)

// SecretSize is the secret's length in bytes (its file holds twice as many
// hex digits).
const SecretSize = 32

// LoadSecret reads dir's secret file: 64 hex digits, surrounding white
// space ignored.
func LoadSecret(dir string) ([]byte, error) {
	p := filepath.Join(dir, SecretFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cluster: reading the secret: %s is missing; make it with `flockctl cluster certs -f SPEC --dir DIR` and copy DIR/%s there (the Ansible role does both): %w", p, SecretFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the secret: %w", err)
	}
	secret, err := parseSecret(data)
	if err != nil {
		return nil, fmt.Errorf("cluster: the secret in %s %w; copy the flock's secret file there again (every host has the same one)", p, err)
	}
	return secret, nil
}

func parseSecret(data []byte) ([]byte, error) {
	text := strings.TrimSpace(string(data))
	secret, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("is not hex (want %d hex digits)", 2*SecretSize)
	}
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("has %d bytes, want %d (%d hex digits)", len(secret), SecretSize, 2*SecretSize)
	}
	return secret, nil
}
