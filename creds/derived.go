package creds

import (
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/cluster"
)

// In a multi-host flock an agent's seed is derived from the flock's
// secret (cluster.AgentSeed): every host computes every agent's public
// key, so every bus lists every agent, and the seed written for an agent
// is the same on whichever host it runs. The operator's and the proxy's
// stay random per host: they reach only their own bus.

// Derived reports whether name's seed is derived from a secret: the
// agents' are, the operator's and the proxy's are not.
func Derived(name string) bool {
	return ValidName(name) && strings.HasPrefix(name, "flock-")
}

// AgentKey is the public key of agent user name (flock-3) derived from
// secret, as Store.Ensure writes its seed.
func AgentKey(secret []byte, name string) (string, error) {
	kp, err := derivedPair(secret, name)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// AgentKeys are the public keys of the named agent users derived from
// secret: the keys of agents on other hosts, which have no seed here.
func AgentKeys(secret []byte, names []string) (map[string]string, error) {
	keys := make(map[string]string, len(names))
	for _, name := range names {
		pub, err := AgentKey(secret, name)
		if err != nil {
			return nil, err
		}
		keys[name] = pub
	}
	return keys, nil
}

func derivedPair(secret []byte, name string) (nkeys.KeyPair, error) {
	if !Derived(name) {
		return nil, fmt.Errorf("%q is not an agent's identity; only agents' seeds are derived", name)
	}
	seed, err := cluster.AgentSeed(secret, name)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed(seed) // holds seed: kp.Wipe wipes it

	if err != nil {
		return nil, fmt.Errorf("deriving the nkey of %s: %w", name, err)
	}
	return kp, nil
}
