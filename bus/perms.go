package bus

import (
	"slices"
	"time"

	"github.com/flockrun/flock/bus/wire"
	"github.com/flockrun/flock/spec"
)

// ResponseGrace is how long past its task timeout a worker may still answer
// the request the task came with (reporting the kill takes a moment).
const ResponseGrace = 30 * time.Second

// ForFlock is the bus f needs. keys maps user names to public nkeys, the
// operator's under OperatorName; a user without a key is left out (its
// identity is not created yet), so ForFlock never invents an identity.
func ForFlock(f *spec.Flock, keys map[string]string) Config {
	c := Config{Listen: f.Bus.Listen(), Monitor: f.Bus.Monitor(), Users: []User{}}
	agents := slices.Clone(f.Agents)
	slices.SortFunc(agents, func(a, b spec.Agent) int { return a.ID - b.ID })
	for _, a := range agents {
		name := spec.UserName(a.ID)
		if key, ok := keys[name]; ok {
			c.Users = append(c.Users, agentUser(a, name, key))
		}
	}
	if key, ok := keys[OperatorName]; ok {
		c.Users = append(c.Users, User{Name: OperatorName, Nkey: key, Publish: []string{">"}, Subscribe: []string{">"}})
	}
	return c
}

// agentUser grants what a's role needs: every agent speaks under its own
// name and hears its own inbox; the role adds the task flow.
func agentUser(a spec.Agent, name, key string) User {
	u := User{
		Name:      name,
		Agent:     a.ID,
		Nkey:      key,
		Publish:   []string{wire.AgentSubjects(a.ID)},
		Subscribe: []string{wire.Inbox(a.ID) + ".>"},
	}
	switch a.Role {
	case spec.RoleWorker:
		u.Subscribe = append(u.Subscribe, wire.RoleTasks(string(spec.RoleWorker)), wire.AgentTasks(a.ID), wire.Broadcast)
		u.Publish = append(u.Publish, wire.ResultSubject)
		// The result also answers the request the task came with. The
		// requester picks the reply subject and the server lets the worker
		// publish there once, whatever it is: flock-agent must answer
		// only replies under _INBOX., or an orchestrator could make a
		// worker speak on another agent's subjects.
		u.ResponseTTL = a.TaskTimeout + ResponseGrace
	case spec.RoleOrchestrator:
		u.Publish = append(u.Publish, wire.TasksAll, wire.Broadcast)
		u.Subscribe = append(u.Subscribe, wire.ResultSubject, wire.AllEvents)
	case spec.RoleMonitor:
		u.Subscribe = append(u.Subscribe, wire.AllHeartbeats, wire.AllEvents)
	}
	u.Publish = sorted(append(u.Publish, a.Subjects.Publish...))
	u.Subscribe = sorted(append(u.Subscribe, a.Subjects.Subscribe...))
	return u
}

func sorted(l []string) []string {
	slices.Sort(l)
	return slices.Compact(l)
}
