// Package cluster is the material of a multi-host flock: its CA, each
// host's certificate, and the flock-wide secret the route password and
// the agents' seeds are derived from.
//
// Provision's minimal copy (H2): the derivations provision needs, with
// the signatures of the design; the PKI comes with the package's own
// version (H5), which replaces this file at the merge.
package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nkeys"
)

// Dir holds a host's cluster material: ca.crt, host.crt, host.key,
// secret, and the route.password provision derives (root, 0700).
const Dir = "/etc/flock/cluster"

// derive is HMAC-SHA256 of label keyed with the secret: one secret, many
// independent values, none of which reveals it or another.
func derive(secret, label string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// RoutePassword is the password the hosts' buses route with, the same on
// every host (hex: it goes into nats-route:// URLs unescaped).
func RoutePassword(secret string) string {
	return hex.EncodeToString(derive(secret, "flock route password"))
}

// AgentSeed is the user nkey seed of agent user name (flock-3), the same
// on every host, so every bus knows every agent's public key and an agent
// may move between hosts.
func AgentSeed(secret, name string) ([]byte, error) {
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, derive(secret, "flock agent nkey "+name))
	if err != nil {
		return nil, fmt.Errorf("deriving the nkey of %s: %w", name, err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	// A copy: Wipe overwrites the pair's own.
	return bytes.Clone(seed), err
}
