// Package secrets is what flock-proxy does with the spec's secrets, as
// plain functions: the placeholder an agent holds in place of a secret
// (Placeholder), the swap of placeholders for secrets in a request toward
// a host they are bound to (Swap) and back in its answer (Unswap,
// UnswapHeader), and the CA whose leaf certificates let the proxy
// terminate an agent's TLS for those hosts (CA). It touches no socket
// and no file.
package secrets
