package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// EgressSubjects are the proxy's decisions, one subject per agent
// (flock.egress.<id>; 0: a client that is not an agent). Only the proxy
// publishes there; the operator hears everything.
const EgressSubjects = "flock.egress.>"

// EgressSubject is where the proxy publishes agent id's decisions.
func EgressSubject(id int) string { return "flock.egress." + strconv.Itoa(id) }

// Reasons of a denial over an agent's share of the proxy (spec shares):
// the bus counts each as a violation of that kind.
const (
	EgressOverTunnels    = "over-tunnels"
	EgressOverHandshakes = "over-handshakes"
)

// EgressViolation is the violation kind of a denial's reason ("": none).
func EgressViolation(reason string) string {
	switch reason {
	case EgressOverTunnels:
		return ViolationTunnels
	case EgressOverHandshakes:
		return ViolationHandshakes
	}
	return ""
}

// EgressEvent is one decision of the egress proxy, as the journal has it.
type EgressEvent struct {
	Agent      int     `json:"agent"`
	Decision   string  `json:"decision"` // allow or deny
	Reason     string  `json:"reason"`
	Name       string  `json:"name"` // what CONNECT asked for
	Port       uint16  `json:"port"`
	Addr       string  `json:"addr,omitempty"` // where the proxy connected
	BytesUp    int64   `json:"bytes_up"`
	BytesDown  int64   `json:"bytes_down"`
	DurationMS float64 `json:"duration_ms"`
	Suppressed int     `json:"suppressed,omitempty"` // denials for the same reason not sent before this one
}

// EncodeEgress is the body of an EgressEvent.
func EncodeEgress(e EgressEvent) ([]byte, error) { return json.Marshal(e) }

// ParseEgress reads what EncodeEgress wrote.
func ParseEgress(b []byte) (EgressEvent, error) {
	var e EgressEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("egress event: %w", err)
	}
	if e.Decision != "allow" && e.Decision != "deny" {
		return e, fmt.Errorf("egress event: decision %q, not allow or deny", e.Decision)
	}
	return e, nil
}
