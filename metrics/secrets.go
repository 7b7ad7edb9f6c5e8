package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockrun/flock/wire"
)

// The proxy's counts of the agents' secrets, from the same reports as
// the model gateway's figures. They live in flock-proxy's memory: its
// restart starts them at zero, which a counter's rate() takes as a reset.
var (
	secretRequests = desc("agent_secret_requests_total",
		"Requests of the agent that carried the secret through flock-proxy (its placeholder swapped, or the secret injected); since flock-proxy started (a restart resets it).", "agent", "secret")
	secretRefused = desc("agent_secret_refused_total",
		"Requests of the agent carrying the secret that flock-proxy refused, by reason: "+wire.SecretRefusedRule+" (outside the secret's rules), "+
			wire.SecretRefusedUnbound+" (toward a host the secret is not bound to); since flock-proxy started (a restart resets it).", "agent", "secret", "reason")
)

// collectSecrets sends agent a's secrets' counts from its last report,
// every reason of each, so that rate() has a series from the start.
func collectSecrets(ch chan<- prometheus.Metric, a string, r *wire.ModelReport) {
	if r == nil {
		return
	}
	for name, u := range r.Secrets {
		ch <- counter(secretRequests, float64(u.Requests), a, name)
		for _, reason := range wire.SecretRefusals {
			ch <- counter(secretRefused, float64(u.Refused[reason]), a, name, reason)
		}
	}
}
