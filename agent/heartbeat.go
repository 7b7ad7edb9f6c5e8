package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/flockrun/flock/wire"
	"golang.org/x/sys/unix"
)

// Event publishes a wire.Event of kind on wire.Events(id). Like every
// publish it is buffered while the bus is away.
func (a *Agent) Event(kind string, data map[string]any) error {
	return a.publishJSON(wire.Events(a.env.ID), wire.Event{Agent: a.env.ID, Time: time.Now().UTC(), Kind: kind, Data: data})
}

// Heartbeats publishes a heartbeat at once and then every every (the
// default when not positive), until ctx ends.
func (a *Agent) Heartbeats(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultHeartbeat
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := a.heartbeat(); err != nil {
			a.log.Warn("heartbeat", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *Agent) heartbeat() error {
	now := time.Now()
	return a.publishJSON(wire.Heartbeat(a.env.ID), wire.HeartbeatMsg{
		Agent:       a.env.ID,
		Time:        now.UTC(),
		UptimeS:     now.Sub(a.start).Seconds(),
		RSSBytes:    rss(),
		TasksDone:   a.done.Load(),
		TasksFailed: a.failed.Load(),
	})
}

func (a *Agent) publishJSON(subject string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", subject, err)
	}
	if err := a.nc.Publish(subject, b); err != nil {
		return fmt.Errorf("publishing %s: %w", subject, err)
	}
	return nil
}

// rss is the resident set of this process: VmRSS from /proc, or, where
// /proc is not mounted, the peak resident set getrusage knows.
func rss() uint64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// "VmRSS:	   12345 kB"
			if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
				if f := bytes.Fields(rest); len(f) == 2 {
					if n, err := strconv.ParseUint(string(f[0]), 10, 64); err == nil {
						return n << 10
					}
				}
			}
		}
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil && ru.Maxrss > 0 {
		return uint64(ru.Maxrss) << 10 // kilobytes on Linux
	}
	return 0
}
