package main

// probe heartbeats: the operator's view of one agent's heartbeats, for the
// VM tier's neighbour under load. Run as root on the flock's host.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// busConfigPath is where provision writes the bus's config (bus.ConfigPath;
// not imported: the bus package would bring the whole NATS server in).
const busConfigPath = "/etc/flock/bus.json"

// Heartbeats is what `probe heartbeats` writes: when each heartbeat
// arrived, as gaps between consecutive arrivals.
type Heartbeats struct {
	Agent   int       `json:"agent"`
	Subject string    `json:"subject"`
	Count   int       `json:"count"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	GapsMS  []float64 `json:"gaps_ms"`
}

// heartbeats subscribes agent.<id>.heartbeat as the operator until
// SIGTERM or SIGINT (or -for), then writes the arrivals to -out.
func heartbeats(args []string) error {
	fl := flag.NewFlagSet("heartbeats", flag.ContinueOnError)
	id := fl.Int("agent", 0, "the agent whose heartbeats to record")
	out := fl.String("out", "", "where to write the JSON result (written on exit)")
	dur := fl.Duration("for", 0, "stop after this long (default: at SIGTERM)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *id <= 0 || *out == "" {
		return fmt.Errorf("usage: probe heartbeats -agent ID -out FILE [-for D]")
	}
	nc, err := operatorConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	h := Heartbeats{Agent: *id, Subject: wire.Heartbeat(*id), GapsMS: []float64{}}
	var mu sync.Mutex
	sub, err := nc.Subscribe(h.Subject, func(*nats.Msg) {
		now := time.Now() // arrival on this host, not the agent's own clock
		mu.Lock()
		defer mu.Unlock()
		if h.Count > 0 {
			h.GapsMS = append(h.GapsMS, float64(now.Sub(h.Last).Microseconds())/1000)
		} else {
			h.First = now
		}
		h.Last = now
		h.Count++
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", h.Subject, err)
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribe %s: %w", h.Subject, err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var timeout <-chan time.Time
	if *dur > 0 {
		timeout = time.After(*dur)
	}
	select {
	case <-stop:
	case <-timeout:
	}
	_ = sub.Unsubscribe()
	mu.Lock()
	b, err := json.Marshal(h)
	mu.Unlock()
	if err != nil {
		return err
	}
	return writeAtomic(*out, b)
}

// operatorConn connects as the operator, the way flockctl does
// (bus.System.Operator): the bus's listen address from its config, the
// operator's nkey seed. It stays subscribed across a bus restart.
func operatorConn() (*nats.Conn, error) {
	b, err := os.ReadFile(busConfigPath)
	if err != nil {
		return nil, err
	}
	var c struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Listen == "" {
		return nil, fmt.Errorf("%s: no listen address (%v)", busConfigPath, err)
	}
	seed := spec.CredPath("operator")
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("the operator's credential %s: %w", seed, err)
	}
	nc, err := nats.Connect("nats://"+c.Listen, opt, nats.Name("probe-"+strconv.Itoa(os.Getpid())),
		nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("connect to %s as the operator: %w", c.Listen, err)
	}
	return nc, nil
}
