package wire

import (
	"encoding/json"
	"strings"
)

// A bus on a side of a split cluster that cannot store tasks answers a
// task published there itself (bus/quorum.go), in the shape of a
// JetStream publish acknowledgement with its error set, which every
// JetStream client reads as an API error: the server's own code for
// "JetStream system temporarily unavailable", and a description that
// starts with noQuorumPrefix and says why.

// NoQuorumCode is the JetStream error code of the refusal
// (nats-server's JSClusterNotAvailErr, status 503).
const NoQuorumCode = 10008

const noQuorumPrefix = "flock: "

// NoQuorumReply is the refusal's body.
func NoQuorumReply(why string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 503, "err_code": NoQuorumCode, "description": noQuorumPrefix + why}})
	return b
}

// ParseNoQuorum reads a JetStream API error's code and description: why
// the bus refused, and true, if it is the bus's refusal (the server's own
// error of the same code says something else).
func ParseNoQuorum(errCode int, description string) (string, bool) {
	why, ok := strings.CutPrefix(description, noQuorumPrefix)
	return why, ok && errCode == NoQuorumCode
}
