package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// GatherWait is how long flockctl waits for every host's bus to answer
// wire.UnitsSubject: one that did not by then is reported as silent.
const GatherWait = 2 * time.Second

// GatherUnits asks every bus of the flock for its host's units (one
// request, every bus answers) and collects the answers of hosts until
// each has answered or wait has passed; an answer of a host not in hosts
// is left out, a host missing from the result did not answer. The error
// is why no bus could be asked at all.
func GatherUnits(ctx context.Context, nc *nats.Conn, hosts []string, wait time.Duration) (map[string]wire.HostUnits, error) {
	got := map[string]wire.HostUnits{}
	if len(hosts) == 0 {
		return got, nil
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return got, fmt.Errorf("asking every bus for its units (%s): %w", wire.UnitsSubject, err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(wire.UnitsSubject, inbox, nil); err != nil {
		return got, fmt.Errorf("asking every bus for its units (%s): %w", wire.UnitsSubject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(got) < len(hosts) {
		m, err := sub.NextMsgWithContext(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return got, nil // the hosts missing did not answer in time
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return got, fmt.Errorf("no bus answers %s (is flock.service running?)", wire.UnitsSubject)
		}
		if err != nil {
			return got, fmt.Errorf("waiting for the buses' units (%s): %w", wire.UnitsSubject, err)
		}
		u, err := wire.ParseUnits(m.Data)
		if err != nil || !slices.Contains(hosts, u.Host) {
			continue // a bus of another version or another flock: not one of ours
		}
		got[u.Host] = u
	}
	return got, nil
}

// AddHolders names the holder of each running task that has none in
// entries (ListTasks asks only this host's desk) from the other hosts'
// desks, as GatherUnits brought them.
func AddHolders(entries []TaskEntry, answers map[string]wire.HostUnits) {
	holders := map[uint64]int{}
	for _, u := range answers {
		for _, h := range u.Held {
			holders[h.Seq] = h.Agent
		}
	}
	for i, e := range entries {
		if e.State == Running && e.Holder == 0 && e.seq > 0 {
			entries[i].Holder = holders[e.seq]
		}
	}
}
