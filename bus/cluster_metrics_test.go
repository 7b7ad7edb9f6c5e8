package bus

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestClusterSnapshotPeers: /metrics's view of the other hosts. Each bus
// sees a route to every peer; when b's bus stops, a and c each see b
// down and the other up, and b again once it is back.
// Tier: unit (a real three-server cluster on loopback, as the cluster
// tests).
func TestClusterSnapshotPeers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster forms and loses a host in seconds")
	}
	tc := newTestCluster(t, 3)
	tc.waitReady()
	peers := func(i int) map[string]bool {
		snap, _ := tc.servers[i].Snapshot(context.Background()) // the peers come before what may fail
		return snap.Peers
	}
	seeAll := func(want map[int]map[string]bool) func() bool {
		return func() bool {
			for i, w := range want {
				if !maps.Equal(peers(i), w) {
					return false
				}
			}
			return true
		}
	}
	up := map[int]map[string]bool{0: {"b": true, "c": true}, 1: {"a": true, "c": true}, 2: {"a": true, "b": true}}
	waitForWithin(t, 30*time.Second, "every bus to see routes to both others", seeAll(up))

	tc.servers[1].Shutdown()
	waitForWithin(t, 30*time.Second, "a and c to see b down and each other up",
		seeAll(map[int]map[string]bool{0: {"b": false, "c": true}, 2: {"a": true, "b": false}}))

	tc.start(1)
	waitForWithin(t, 30*time.Second, "every bus to see b again", seeAll(up))
}
