// Command client is the floor of an idle agent on the bus (installed as
// floor-client by make bench): bare NATS connections heartbeating as
// flock-agent does, and nothing else. It links nats.go alone, so one
// connection in its own process is the floor of flock-agent's memory.
//
//	floor-client FIRST LAST URL READY
//	    agents FIRST..LAST, one connection each in this one process, each
//	    publishing a heartbeat at once and then every 30 s; creates the
//	    file READY once all are connected; runs until SIGTERM
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// every is flock-agent's default heartbeat (agent.DefaultHeartbeat); not
// imported, to keep the agent's dependencies out of this binary.
const every = 30 * time.Second

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: floor-client FIRST LAST URL READY")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "floor-client:", err)
		os.Exit(1)
	}
}

func run(rawFirst, rawLast, url, ready string) error {
	first, err := strconv.Atoi(rawFirst)
	if err != nil {
		return fmt.Errorf("first id: %w", err)
	}
	last, err := strconv.Atoi(rawLast)
	if err != nil {
		return fmt.Errorf("last id: %w", err)
	}
	start := time.Now()
	for id := first; id <= last; id++ {
		name := "flock-" + strconv.Itoa(id)
		nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
		// The server may still be starting: the first connection waits.
		for id == first && err != nil && time.Since(start) < 30*time.Second {
			time.Sleep(100 * time.Millisecond)
			nc, err = nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
		}
		if err != nil {
			return fmt.Errorf("agent %d: %w", id, err)
		}
		defer nc.Close()
		go func() {
			for {
				body, _ := json.Marshal(wire.HeartbeatMsg{Agent: id, Time: time.Now().UTC(), UptimeS: time.Since(start).Seconds()})
				_ = nc.Publish(wire.Heartbeat(id), body)
				time.Sleep(every)
			}
		}()
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
