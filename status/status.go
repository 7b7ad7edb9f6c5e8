// Package status is what `flockctl status` and `flockctl tasks` show: a
// row per agent made from what the host, its bus and the other hosts'
// buses say (Read, then Build, which is pure), its table, its JSON (a
// contract) and the notes below them; and the tasks table with the host
// of each task. flockctl wires it to the host; nothing here parses flags.
package status

import (
	"fmt"
	"time"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// Agent is one row of `flockctl status`; its JSON keys are a contract.
type Agent struct {
	ID int `json:"id"`
	// Host is where the agent runs, in a flock on several hosts only.
	Host     string `json:"host,omitempty"`
	User     string `json:"user"`
	UID      uint32 `json:"uid"`
	Unit     string `json:"unit"`
	State    string `json:"state"` // systemd's ActiveState; "absent" if not loaded; "unknown" if its host did not say
	SubState string `json:"sub_state"`
	// StateNote is why the state is unknown ("host b did not answer").
	StateNote string `json:"state_note,omitempty"`
	Role      string `json:"role"`
	Level     string `json:"level"`
	Label     string `json:"label"`
	// IPCScoped: the kernel keeps the agent's abstract UNIX sockets and
	// signals to itself (Landlock); false means they are shared host-wide.
	IPCScoped bool `json:"ipc_scoped"`
	// Bus is "connected", "disconnected" or "unknown" (the bus did not
	// answer); the rest is what the bus saw of the agent since it started.
	Bus           string     `json:"bus"`
	Connections   int        `json:"connections"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	HeartbeatAgeS *float64   `json:"heartbeat_age_s,omitempty"`
	// Violations is every violation the bus counted for the agent (kept
	// across bus restarts), ViolationsByKind the same by wire kind.
	Violations       uint64            `json:"violations"`
	ViolationsByKind map[string]uint64 `json:"violations_by_kind,omitempty"`
	Drift            string            `json:"drift,omitempty"`
	// RefusedPackets is the agent's packets the firewall denied since the
	// table was last written, RefusedLogged how many of them it logged
	// (the rest were over the agent's own log limit).
	RefusedPackets uint64 `json:"refused_packets"`
	RefusedLogged  uint64 `json:"refused_logged"`
	// Restarts and LastExit are systemd's; Diagnosis names the wall that
	// likely keeps the agent dying, and the spec change that lifts it.
	Restarts  uint32           `json:"restarts"`
	LastExit  string           `json:"last_exit,omitempty"`
	Diagnosis *units.Diagnosis `json:"diagnosis,omitempty"`
	// Proxy is flock-proxy.service's ActiveState for an agent with names
	// in its egress or model APIs (it reaches them only through it); ""
	// for the rest.
	Proxy string `json:"proxy,omitempty"`
	// Models is its use of each model API it is granted (or used), as
	// the proxy counted it (models.go).
	Models []ModelUse `json:"models,omitempty"`
	// Budgets are the budgets it is in, each with what all its agents
	// spent as the newest report of any of them says (budgets.go); the
	// flock's spend is the sum of every row's models.
	Budgets []BudgetSpend `json:"budgets,omitempty"`
	// Secrets are what flock-proxy did with each secret it is granted
	// (or used) since the proxy started (secrets.go).
	Secrets []SecretUse `json:"secrets,omitempty"`

	remote bool // runs on another host: its journal is there
}

// Of is agent a's row as its unit's status st says, before the bus and
// the firewall are heard.
func Of(f *spec.Flock, a spec.Agent, st units.Status) Agent {
	row := Agent{
		ID: a.ID, User: spec.UserName(a.ID), UID: f.UID(a.ID), Unit: spec.UnitName(a.ID),
		State: st.ActiveState, SubState: st.SubState,
		Role: string(a.Role), Level: string(a.Level), Label: a.Level.Label(),
		Restarts: st.Restarts,
	}
	if st.LastExit.Code != "" {
		row.LastExit = st.LastExit.String()
	}
	if st.Name == "" {
		row.State = "absent"
	}
	return row
}

// driftOf sorts a plan's changes by the agent they concern; the rest
// (the firewall, the bus, users of agents not in the spec) concern the
// whole flock.
func driftOf(f *spec.Flock, p plan.Plan) (byAgent map[int][]string, flockWide []string) {
	owner := map[string]int{}
	for _, a := range f.Agents {
		owner[spec.UnitName(a.ID)] = a.ID
		owner[spec.UserName(a.ID)] = a.ID
		owner[f.AgentDir(a.ID)] = a.ID
		owner[f.LogPath(a.ID)] = a.ID
	}
	byAgent = map[int][]string{}
	for _, c := range p.Changes {
		if id, ok := owner[c.Target]; ok {
			byAgent[id] = append(byAgent[id], fmt.Sprintf("%s: %s", c.Kind, c.Why))
			continue
		}
		flockWide = append(flockWide, fmt.Sprintf("%s %s: %s", c.Kind, c.Target, c.Why))
	}
	return byAgent, flockWide
}

func (r *Agent) busFields(st *wire.BusStatus, now time.Time) {
	if st == nil {
		r.Bus = "unknown"
		return
	}
	seen := st.Agents[r.ID]
	r.Bus, r.Connections = "disconnected", seen.Connections
	r.Violations, r.ViolationsByKind = seen.ViolationsTotal, seen.Violations
	if seen.Connections > 0 {
		r.Bus = "connected"
	}
	if at := seen.HeartbeatAt; at != nil {
		age := now.Sub(*at).Seconds()
		r.LastHeartbeat, r.HeartbeatAgeS = at, &age
	}
}

// unknown marks a row whose unit state could not be read, and why.
func (r *Agent) unknown(why string) {
	r.State, r.SubState, r.StateNote = "unknown", "", why
	r.Restarts, r.LastExit = 0, ""
}
