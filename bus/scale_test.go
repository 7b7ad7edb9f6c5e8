package bus

// Tier: unit. A flock larger than nats-server's default of 1000 consumers
// per stream gets its bus: one consumer per worker on TASKS, at start and
// at a reload that grows it.

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
)

// Serial: its reload makes 1010 consumers within the bus's 30 s
// (setupTimeout), waiting on the disk for most of the 17 s that takes
// alone; beside the other tests' servers it took 22-28 s, and over 30 on
// a busy machine.
func TestMoreWorkersThanTheServersDefaultConsumerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("tier unit: over 1000 identities and consumers; skipped with -short")
	}
	const n = server.JSDefaultMaxConsumersPerStream + 20
	config := countedFlocks(t, n)
	s := startBus(t, config(10), Options{})
	// One per worker, and the bus's own (any worker's, the dead-letterer's).
	own := consumers(t, s) - 10
	if err := s.Reload(config(n)); err != nil {
		t.Fatalf("growing to %d workers: %v", n, err)
	}
	if got := consumers(t, s); got != n+own {
		t.Errorf("%d consumers for %d workers, want %d", got, n, n+own)
	}
}

// countedFlocks makes identities for n default agents and returns the bus
// config of the first m of them, on a free port with no monitoring port
// (other tests' buses may be up).
func countedFlocks(t *testing.T, n int) func(m int) Config {
	t.Helper()
	names := []string{creds.OperatorName}
	for id := 1; id <= n; id++ {
		names = append(names, spec.UserName(id))
	}
	ids := newIdentities(t, names...)
	return func(m int) Config {
		f, err := spec.Count(m)
		if err != nil {
			t.Fatal(err)
		}
		c := ForFlock(f, ids.keys())
		c.Listen, c.Monitor = "127.0.0.1:-1", ""
		return c
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

// A reload asks the server only for the consumers that change: adding one
// worker to many makes one consumer, and a changed setting reaches all.
func TestReloadTouchesOnlyTheConsumersThatChange(t *testing.T) {
	t.Parallel()
	config := countedFlocks(t, 51)
	s := startBus(t, config(50), Options{})
	before := apiRequests(t, s)
	if err := s.Reload(config(51)); err != nil {
		t.Fatal(err)
	}
	// The streams (each updated in place), one listing, one new consumer.
	if n := apiRequests(t, s) - before; n > 10 {
		t.Errorf("adding one worker to 50 took %d JetStream API requests, want at most 10", n)
	}
	changed := config(51)
	changed.Tasks.MaxDeliveries = 7
	if err := s.Reload(changed); err != nil {
		t.Fatal(err)
	}
	jsz, err := s.ns.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true, Config: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, acc := range jsz.AccountDetails {
		for _, st := range acc.Streams {
			for _, ci := range st.Consumer {
				if st.Name == "TASKS" {
					n++
					if ci.Config.MaxDeliver != 7 {
						t.Errorf("consumer %s kept max_deliver %d after the reload", ci.Name, ci.Config.MaxDeliver)
					}
				}
			}
		}
	}
	if n != 52 {
		t.Errorf("TASKS has %d consumers, want 52 (51 workers' and any worker's)", n)
	}
}

func apiRequests(t *testing.T, s *Server) uint64 {
	t.Helper()
	jsz, err := s.ns.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return jsz.API.Total
}
