package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nkeys"
)

// Labels of the derivations: HMAC-SHA256(secret, label). Changing one
// changes every host's password or every agent's key.
const (
	routePasswordLabel = "flock route password"
	agentSeedLabel     = "flock agent nkey " // + the agent's name
)

func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// RoutePassword is the password the buses' routes authenticate with (user
// "flock"), the same on every host: 64 hex digits.
func RoutePassword(secret []byte) string {
	return hex.EncodeToString(derive(secret, routePasswordLabel))
}

// AgentSeed is the nkey user seed ("SU…") of the agent called name (e.g.
// "flock-2"): the same on every host, so every bus knows every agent's
// public key and an agent may move between hosts.
func AgentSeed(secret []byte, name string) ([]byte, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("cluster: deriving the nkey of %s: the secret has %d bytes, want %d", name, len(secret), SecretSize)
	}
	if name == "" {
		return nil, fmt.Errorf("cluster: deriving an agent's nkey: no agent name")
	}
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, derive(secret, agentSeedLabel+name))
	if err != nil {
		return nil, fmt.Errorf("cluster: deriving the nkey of %s: %w", name, err)
	}
	// Seed returns the pair's own slice, which Wipe overwrites: copy first.
	seed, err := kp.Seed()
	seed = bytes.Clone(seed)
	kp.Wipe()
	return seed, err
}
