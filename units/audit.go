package units

import (
	"fmt"
	"strconv"

	"github.com/flockrun/flock/spec"
)

// AuditPrefix names flockctl audit's units: agent a's walls, running
// flock-agent's probe mode instead of the agent's program.
const AuditPrefix = "flock-audit@"

// ForAudit is agent a's unit with only what it runs changed: `flock-agent
// probe BATCH` as the agent, inside the same User, paths, credential,
// walls and (at a contained level) container, under its own name, which
// carries ours. It does not restart, its container and runtime directory
// are its own (the agent's keep running), and its standard output, the
// answered batch, goes to output, a file systemd opens as root.
func ForAudit(f *spec.Flock, a spec.Agent, o Options, batch []byte, output string) Unit {
	return forAudit(f, a, o, batch, output, "audit")
}

// ForAuditPeer is ForAudit for agent a as the colluding peer of another
// agent's audit: the same unit under a name and container of its own, so
// it runs beside a's own audit unit.
func ForAuditPeer(f *spec.Flock, a spec.Agent, o Options, batch []byte, output string) Unit {
	return forAudit(f, a, o, batch, output, "peer")
}

func forAudit(f *spec.Flock, a spec.Agent, o Options, batch []byte, output, role string) Unit {
	suffix := "-" + role
	u := forAgent(f, a, o, []string{"probe", string(batch)}, suffix)
	u.Name = AuditUnit(a.ID)
	u.Description = fmt.Sprintf("flock audit of agent %d: %s", a.ID, a.Level.Label())
	if role == "peer" {
		u.Name = AuditPeerUnit(a.ID)
		u.Description = fmt.Sprintf("flock audit's colluding peer, agent %d: %s", a.ID, a.Level.Label())
	}
	u.Hash = ""
	props := u.Properties[:0:0]
	for _, p := range u.Properties {
		switch p.Name {
		case "Restart", "RestartUSec", "RestartSteps", "RestartMaxDelayUSec", "StartLimitIntervalUSec":
			continue
		case "RuntimeDirectory":
			p.Value = []string{"flock-sandbox/" + strconv.Itoa(a.ID) + suffix}
		}
		props = append(props, p)
	}
	// Only the answers in the file: what the runtime or flock-agent says
	// on stderr goes to the journal.
	u.Properties = append(props, Property{"StandardOutputFile", output}, Property{"StandardError", "journal"})
	return u
}

// AuditUnit is the name of agent id's audit unit.
func AuditUnit(id int) string { return AuditPrefix + strconv.Itoa(id) + ".service" }

// AuditPeerUnit is the name of agent id's unit as a colluding peer.
func AuditPeerUnit(id int) string { return AuditPrefix + strconv.Itoa(id) + "-peer.service" }
