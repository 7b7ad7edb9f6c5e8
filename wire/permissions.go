package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// PermissionsSubject asks the bus for the permissions in force for one
// agent: the request's body is the agent's id in decimal, the answer a
// Permissions. Only the operator may publish on flock.bus.*.
const PermissionsSubject = "flock.bus.permissions"

// Permissions are one agent's rights on the running bus, as the bus handed
// them to nats-server (allow and deny lists; an empty allow list with deny
// ">" is nothing at all).
type Permissions struct {
	Agent     int          `json:"agent"`
	User      string       `json:"user"`            // "flock-3"
	Nkey      string       `json:"nkey"`            // its public key
	Publish   SubjectRules `json:"publish"`         // what it may publish
	Subscribe SubjectRules `json:"subscribe"`       // what it may subscribe to
	Responses *Responses   `json:"responses"`       // requests it may answer; nil: none
	Error     string       `json:"error,omitempty"` // the bus's refusal (no such agent, a bad request)
}

// SubjectRules are nats-server's allow and deny lists for one direction.
type SubjectRules struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// Responses is nats-server's allow_responses: how many answers to one
// request, for how long after it.
type Responses struct {
	MaxMsgs int           `json:"max_msgs"`
	Expires time.Duration `json:"expires_ns"`
}

// PermissionsRequest is the body asking for agent id's permissions.
func PermissionsRequest(id int) []byte { return []byte(strconv.Itoa(id)) }

// ParsePermissionsRequest reads the agent id of a request. The body comes
// from whoever may publish on the subject; it is read strictly.
func ParsePermissionsRequest(body []byte) (int, error) {
	id, err := strconv.Atoi(string(body))
	if err != nil || id <= 0 || strconv.Itoa(id) != string(body) {
		return 0, fmt.Errorf("%s: the request's body %q is not an agent id", PermissionsSubject, body)
	}
	return id, nil
}

// EncodePermissions and ParsePermissions are the answer on the wire; a
// refusal comes back as an error from ParsePermissions.
func EncodePermissions(p Permissions) ([]byte, error) { return json.Marshal(p) }

func ParsePermissions(data []byte) (Permissions, error) {
	var p Permissions
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("%s answered %q: %w", PermissionsSubject, data, err)
	}
	if p.Error != "" {
		return p, fmt.Errorf("%s: the bus answered: %s", PermissionsSubject, p.Error)
	}
	return p, nil
}
