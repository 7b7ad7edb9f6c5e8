package bus

import (
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// TestSyncPolicyReachesJetStream: the spec's bus.sync is what the running
// JetStream does, always unless the spec says otherwise.
//
// Tier: unit (no root).
func TestSyncPolicyReachesJetStream(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	for _, tc := range []struct {
		name     string
		sync     time.Duration
		always   bool
		interval time.Duration
	}{
		{"the default: always", spec.SyncAlways, true, 2 * time.Minute},
		{"an interval", 250 * time.Millisecond, false, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := testFlock()
			f.Bus.Sync = tc.sync
			s := startBus(t, ForFlock(f, ids.keys()), Options{})
			js := s.ns.JetStreamConfig()
			if js == nil || js.SyncAlways != tc.always || js.SyncInterval != tc.interval {
				t.Errorf("JetStream runs with %+v, want sync_always %v, sync_interval %s", js, tc.always, tc.interval)
			}
			if got, want := s.Status().Sync, SyncName(tc.sync); got != want {
				t.Errorf("the status says it syncs %q, want %q", got, want)
			}
		})
	}
}
