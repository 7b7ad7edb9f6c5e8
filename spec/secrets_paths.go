package spec

// Where the pieces of the secrets' design live on a host: one place for
// provision, which makes them, and flock-proxy and the units, which use
// them (docs/secrets.md).

import "strconv"

const (
	// SecretsDir holds flock's own secrets' material: root's only (0700).
	SecretsDir = StateDir + "/secrets"
	// SecretsCAPath is flock-proxy's CA, certificate and key in one PEM
	// file: root's only, handed to flock-proxy.service (SecretsCACredential).
	SecretsCAPath = SecretsDir + "/ca.pem"
	// PlaceholderKeyPath is the random key every placeholder is drawn
	// from (secrets.Stream), so provision writes the same placeholder into
	// a unit each time: root's only, never handed to an agent.
	PlaceholderKeyPath = SecretsDir + "/placeholder.key"
	// SecretsCACertPath is the CA's certificate alone, world-readable.
	SecretsCACertPath = "/etc/flock/ca.crt"
	// SecretsCABundlePath is the system's roots followed by the CA's
	// certificate, world-readable: what CATrustEnv point at, so an agent
	// trusts both (bind-mounted read-only at the same path in containers).
	SecretsCABundlePath = "/etc/flock/ca-bundle.crt"
	// SecretsCACredential is the credential name of SecretsCAPath in
	// flock-proxy.service.
	SecretsCACredential = "secrets-ca"
	// ProxyRuntimeDir is flock-proxy.service's RuntimeDirectory=: its
	// dynamic uid's alone (0700), removed at its stop.
	ProxyRuntimeDir = "/run/flock-proxy"
	// HandOverDir, in ProxyRuntimeDir, is where root hands flock-proxy a
	// secret's new value at a reload: a file named as its credential
	// (SecretCredential), which the proxy takes (reads, then removes).
	HandOverDir = "handover"
	// ProxyHandOverPath is HandOverDir as root finds it.
	ProxyHandOverPath = ProxyRuntimeDir + "/" + HandOverDir
)

// SecretCredential is the credential name of secret name's file in
// flock-proxy.service (LoadCredential=), which flock-proxy reads from
// $CREDENTIALS_DIRECTORY.
func SecretCredential(name string) string { return "secret-" + name }

// PlaceholderLabel is what an agent's placeholder of a secret is drawn
// with (secrets.Stream(key, label)): one per agent and secret, so a
// placeholder names who held it.
func PlaceholderLabel(agent int, secret string) string {
	return "placeholder/" + strconv.Itoa(agent) + "/" + secret
}
