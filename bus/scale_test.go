package bus

// Tier: unit. A flock larger than nats-server's default of 1000 consumers
// per stream gets its bus: one consumer per worker on TASKS, at start and
// at a reload that grows it.

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/spec"
)

func TestMoreWorkersThanTheServersDefaultConsumerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("tier unit: over 1000 identities and consumers; skipped with -short")
	}
	const n = server.JSDefaultMaxConsumersPerStream + 20
	small, err := spec.Count(10)
	if err != nil {
		t.Fatal(err)
	}
	big, err := spec.Count(n)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{OperatorName}
	for _, a := range big.Agents {
		names = append(names, spec.UserName(a.ID))
	}
	ids := newIdentities(t, names...)
	// On a free port, no monitoring port: other tests' buses may be up.
	config := func(f *spec.Flock) Config {
		c := ForFlock(f, ids.keys())
		c.Listen, c.Monitor = "127.0.0.1:-1", ""
		return c
	}
	s := startBus(t, config(small), Options{})
	// One per worker, and the bus's own (any worker's, the dead-letterer's).
	own := consumers(t, s) - 10
	if err := s.Reload(config(big)); err != nil {
		t.Fatalf("growing to %d workers: %v", n, err)
	}
	if got := consumers(t, s); got != n+own {
		t.Errorf("%d consumers for %d workers, want %d", got, n, n+own)
	}
}

func consumers(t *testing.T, s *Server) int {
	t.Helper()
	jsz, err := s.ns.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return jsz.Consumers
}
