package wire

import (
	"encoding/json"
	"strings"
)

// A bus on a side of a split cluster that cannot store tasks answers a
// task published there itself (bus/quorum.go), in the shape of a
// JetStream publish acknowledgement with its error set, which every
// JetStream client reads as an API error: the server's own code for
// "JetStream system temporarily unavailable", and a description that says
// whether the task was stored, and why not.

// NoQuorumCode is the JetStream error code of the refusal
// (nats-server's JSClusterNotAvailErr, status 503).
const NoQuorumCode = 10008

// The description's prefixes: the task was not stored (nobody but the bus
// took it), or it may be (this host's copy took it, leading without a
// majority: should it lead again with the others back, it stores it).
const (
	notStoredPrefix   = "flock: not stored: "
	maybeStoredPrefix = "flock: may not be stored: "
)

// NoQuorumReply is the refusal's body; maybe: the task may yet be stored.
func NoQuorumReply(why string, maybe bool) []byte {
	d := notStoredPrefix + why
	if maybe {
		d = maybeStoredPrefix + why
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 503, "err_code": NoQuorumCode, "description": d}})
	return b
}

// ParseNoQuorum reads a JetStream API error's code and description: why
// the bus refused, whether the task may yet be stored, and true, if it is
// the bus's refusal (the server's own error of the same code says
// something else).
func ParseNoQuorum(errCode int, description string) (why string, maybe, ok bool) {
	if errCode != NoQuorumCode {
		return "", false, false
	}
	if why, ok := strings.CutPrefix(description, notStoredPrefix); ok {
		return why, false, true
	}
	why, ok = strings.CutPrefix(description, maybeStoredPrefix)
	return why, ok, ok
}
