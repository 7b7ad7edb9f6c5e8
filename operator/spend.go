package operator

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// SpendWait bounds asking flock-proxy what the tasks held now have spent:
// a listing does not wait longer for a proxy that is down or slow.
const SpendWait = time.Second

// AddSpend sets the spend so far of each running task a worker holds, as
// flock-proxy says on the holder's wire.TaskSpendSubject (Final false:
// its requests under way are not waited for). All are asked at once,
// within wait; a task whose proxy does not answer in time, has no one
// listening or answers garbled keeps no spend: the listing shows none
// rather than fail.
func AddSpend(ctx context.Context, nc *nats.Conn, entries []TaskEntry, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var wg sync.WaitGroup
	for i := range entries {
		e := &entries[i]
		if e.State != Running || e.Holder == 0 || e.seq == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ask := wire.EncodeTaskSpendRequest(wire.TaskSpendRequest{Seq: e.seq})
			msg, err := nc.RequestWithContext(ctx, wire.TaskSpendSubject(e.Holder), ask)
			if err != nil {
				return
			}
			if s, err := wire.ParseTaskSpend(msg.Data); err == nil {
				e.Spend = &s
			}
		}()
	}
	wg.Wait()
}
