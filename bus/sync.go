package bus

import (
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flockrun/flock/spec"
)

// syncOptions sets how JetStream brings what it stores to the disk.
//
// SyncAlways (nats-server v2.15): on one host every message block write
// is followed by fsync before the store returns, so before the publish
// is acknowledged; index, key and consumer state files are written with
// O_SYNC. In a cluster a stream of more than one replica relaxes its own
// blocks to sync on flush (snapshot), because what it acknowledges is in
// its Raft log first: that log, and the meta group's, are file stores
// with SyncAlways, and the meta group syncs its commits too, so an
// acknowledged write is on the disks of a majority.
//
// Without it nats-server syncs every SyncInterval (2m by default), and a
// power cut loses whatever the kernel still held: acknowledged tasks and
// results among it.
func syncOptions(o *server.Options, every time.Duration) {
	if every == spec.SyncAlways {
		o.SyncAlways = true
		return
	}
	o.SyncInterval = every
}

// syncing is how the running JetStream syncs, as SyncName says it.
func (s *Server) syncing() string {
	js := s.ns.JetStreamConfig()
	switch {
	case js == nil:
		return ""
	case js.SyncAlways:
		return SyncName(spec.SyncAlways)
	}
	return SyncName(js.SyncInterval)
}

// SyncName is a sync policy as the spec writes it.
func SyncName(every time.Duration) string {
	if every == spec.SyncAlways {
		return "always"
	}
	return every.String()
}
