package proxy

import (
	"net/netip"

	"github.com/flockrun/flock/wire"
	"strconv"
	"time"
)

// Record is one decision of the proxy: who, what, where, how much, why.
type Record struct {
	Agent     int // 0: not an agent
	UID       uint32
	Name      string // what CONNECT asked for (a name or an address)
	Port      uint16
	Addr      netip.Addr // where the proxy connected (or what the name resolved to)
	BytesUp   int64
	BytesDown int64
	Duration  time.Duration
	Reason    string // ReasonAllowed or why not
	Detail    string
	// Provider is the model API of a request to the gateway ("" a
	// CONNECT), Status the answer flock gave it.
	Provider string
	Status   int
}

// Allowed says whether a tunnel was carried.
func (r Record) Allowed() bool { return r.Reason == ReasonAllowed }

// Fields are r as journald fields (AGENT_ID=, NAME=, ...).
func (r Record) Fields() map[string]string {
	f := map[string]string{
		"AGENT_ID":   strconv.Itoa(r.Agent),
		"AGENT_UID":  strconv.FormatUint(uint64(r.UID), 10),
		"NAME":       r.Name,
		"PORT":       strconv.Itoa(int(r.Port)),
		"BYTES_UP":   strconv.FormatInt(r.BytesUp, 10),
		"BYTES_DOWN": strconv.FormatInt(r.BytesDown, 10),
		"DURATION":   r.Duration.String(),
		"REASON":     r.Reason,
		"DECISION":   "deny",
	}
	if r.Allowed() {
		f["DECISION"] = "allow"
	}
	if r.Addr.IsValid() {
		f["ADDR"] = r.Addr.String()
	}
	if r.Detail != "" {
		f["DETAIL"] = oneLine(r.Detail)
	}
	if r.Provider != "" {
		f["PROVIDER"], f["STATUS"] = r.Provider, strconv.Itoa(r.Status)
		delete(f, "PORT")
	}
	return f
}

// Event is r as the bus event on wire.EgressSubject(r.Agent).
func (r Record) Event(suppressed int) wire.EgressEvent {
	name := r.Name
	if r.Provider != "" {
		name = "model:" + r.Provider
	}
	e := wire.EgressEvent{Agent: r.Agent, Decision: "deny", Reason: r.Reason, Name: name, Port: r.Port,
		BytesUp: r.BytesUp, BytesDown: r.BytesDown, DurationMS: float64(r.Duration.Microseconds()) / 1000, Suppressed: suppressed}
	if r.Allowed() {
		e.Decision = "allow"
	}
	if r.Addr.IsValid() {
		e.Addr = r.Addr.String()
	}
	return e
}

// Message is r as one journal line.
func (r Record) Message() string {
	f := r.Fields()
	if r.Provider != "" {
		return "model " + f["DECISION"] + " agent " + f["AGENT_ID"] + " provider " + r.Provider + " status " + f["STATUS"] + " reason " + r.Reason + ": " + f["DETAIL"]
	}
	s := "egress " + f["DECISION"] + " agent " + f["AGENT_ID"] + " " + r.Name + ":" + f["PORT"]
	if a := f["ADDR"]; a != "" {
		s += " addr " + a
	}
	s += " reason " + r.Reason
	if r.Allowed() {
		s += " up " + f["BYTES_UP"] + " down " + f["BYTES_DOWN"] + " in " + f["DURATION"]
	}
	return s
}
