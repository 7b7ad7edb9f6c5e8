package wire

import (
	"encoding/json"
	"fmt"
)

// UnitsSubject is a scatter request: every bus of the flock answers it
// (a plain subscription, not a queue group) with HostUnits, its own
// host's agents' units, so flockctl status on any host sees every
// host's. The request's body is empty. Only the operator may publish on
// flock.bus.*.
const UnitsSubject = "flock.bus.units"

// HostUnits is one bus's answer: its host and, by agent id, each of the
// host's agents.
type HostUnits struct {
	Host   string            `json:"host"` // its host's name in the spec; "" on a single-host flock
	Agents map[int]AgentUnit `json:"agents"`
	// Held is what this bus's task desk has handed to workers (its
	// host's: a worker asks the desk of the bus it is connected to), so
	// flockctl tasks on any host names every task's holder.
	Held []Held `json:"held,omitempty"`
	// Error is why the units could not be read (no D-Bus system bus);
	// Agents then carry only what the bus saw of each agent.
	Error string `json:"error,omitempty"`
}

// AgentUnit is one agent's unit as systemd on its host has it, and what
// that host's bus saw of the agent (its connections and the violations
// it counted are that bus's own).
type AgentUnit struct {
	// Unit is the unit's name when systemd has it loaded; "" when it
	// does not (the agent is absent there).
	Unit        string `json:"unit,omitempty"`
	ActiveState string `json:"active_state,omitempty"` // systemd's: active, failed, activating...
	SubState    string `json:"sub_state,omitempty"`
	// Restarts and the last exit are systemd's NRestarts, ExecMainCode
	// ("exited", "killed", "dumped"; "" while it has not ended) and
	// ExecMainStatus; not read of an inactive unit.
	Restarts   uint32     `json:"restarts,omitempty"`
	ExitCode   string     `json:"exit_code,omitempty"`
	ExitStatus int        `json:"exit_status,omitempty"`
	Bus        AgentOnBus `json:"bus"`
}

// EncodeUnits and ParseUnits are the answer on the wire.
func EncodeUnits(u HostUnits) ([]byte, error) {
	if u.Agents == nil {
		u.Agents = map[int]AgentUnit{}
	}
	return json.Marshal(u)
}

func ParseUnits(data []byte) (HostUnits, error) {
	var u HostUnits
	if err := json.Unmarshal(data, &u); err != nil {
		return u, fmt.Errorf("%s answered %q: %w", UnitsSubject, data, err)
	}
	return u, nil
}
