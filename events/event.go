// Package events is flockctl events: one stream, oldest first, of what
// an operator of a flock wants to know (an agent started, stopped,
// restarted, OOM-killed, failed or killed by a wall; a bus violation; a
// firewall refusal; an egress denial; drift; a dead-lettered task; a
// damaged store; a model API limit reached).
//
// It reads journald's structured fields (systemd's own messages about the
// agents' units, the kernel's firewall log lines, and the records flock's
// own programs write with Record) and the firewall's per-uid counters. The
// mapping from a journal entry to an event is the pure function Map;
// Stream merges the sources behind the small Source interface.
package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Kind is what happened.
type Kind string

// The kinds, as docs/events.md explains them.
const (
	Started         Kind = "started"          // systemd started the agent's unit
	Stopped         Kind = "stopped"          // systemd stopped it (not as part of a restart)
	Restarted       Kind = "restarted"        // systemd scheduled a restart after it died
	OOMKilled       Kind = "oom-killed"       // the kernel killed it at its memory limit
	Failed          Kind = "failed"           // it died or failed to start (how, in the detail)
	WallKilled      Kind = "wall-killed"      // it died of a wall of flock's (a seccomp SIGSYS, W^X)
	BusViolation    Kind = "bus-violation"    // the bus refused what it sent (subject, lease, flood)
	FirewallRefused Kind = "firewall-refused" // table inet flock refused its packets
	EgressDenied    Kind = "egress-denied"    // the egress proxy refused a CONNECT
	DriftFound      Kind = "drift-found"      // provision or reconcile found the host off the spec and could not repair it
	DriftRepaired   Kind = "drift-repaired"   // provision or reconcile put the host back to the provisioned spec
	DeadLettered    Kind = "dead-lettered"    // the bus gave a task up after max_deliveries
	StoreDamaged    Kind = "store-damaged"    // the bus found part of its store unproven at start: what it kept, what it lost
	LimitReached    Kind = "limit-reached"    // the model gateway refused it over a limit of its grant (once per crossing)
)

// Kinds are every kind, in docs/events.md's order.
var Kinds = []Kind{Started, Stopped, Restarted, OOMKilled, Failed, WallKilled, BusViolation,
	FirewallRefused, EgressDenied, DriftFound, DriftRepaired, DeadLettered, StoreDamaged, LimitReached}

// Event is one thing that happened. It is flockctl events' JSON line
// (Encode, Decode).
type Event struct {
	Time   time.Time `json:"time"`
	Agent  int       `json:"agent"` // 0: the flock as a whole (the bus, the proxy)
	Kind   Kind      `json:"kind"`
	Detail string    `json:"detail"`
	// Source is where it was read: systemd, bus, proxy, kernel,
	// firewall-counters, flockctl.
	Source string `json:"source"`
}

// Encode is e as one JSON line.
func (e Event) Encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encoding event %+v: %w", e, err)
	}
	return append(b, '\n'), nil
}

// Decode reads a line Encode wrote; unknown fields or kinds are errors,
// so a reader built against another version says so instead of guessing.
func Decode(line []byte) (Event, error) {
	var e Event
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return e, fmt.Errorf("event %q: %w", line, err)
	}
	if !slices.Contains(Kinds, e.Kind) {
		return e, fmt.Errorf("event %q: unknown kind %q", line, e.Kind)
	}
	return e, nil
}

// Text is e as one line for a terminal: local time to the millisecond,
// who, what, the detail.
func (e Event) Text() string {
	who := "flock"
	if e.Agent > 0 {
		who = "agent " + strconv.Itoa(e.Agent)
	}
	return fmt.Sprintf("%s  %-9s  %-16s  %s", e.Time.Local().Format("2006-01-02 15:04:05.000"), who, e.Kind, e.Detail)
}
