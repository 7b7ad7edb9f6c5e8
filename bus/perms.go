package bus

import (
	"slices"
	"time"

	"github.com/flockrun/flock/bus/wire"
	"github.com/flockrun/flock/spec"
)

// ForFlock is the bus f needs. keys maps user names to public nkeys, the
// operator's under OperatorName; a user without a key is left out (its
// identity is not created yet), so ForFlock never invents an identity.
func ForFlock(f *spec.Flock, keys map[string]string) Config {
	c := Config{Listen: f.Bus.Listen(), Monitor: f.Bus.Monitor(), Users: []User{}, Tasks: Tasks{
		StoreMax: int64(f.Bus.StoreMax), MaxDeliveries: f.Bus.MaxDeliveries, Workers: []int{}}}
	c.Tasks = c.Tasks.withDefaults()
	agents := slices.Clone(f.Agents)
	slices.SortFunc(agents, func(a, b spec.Agent) int { return a.ID - b.ID })
	var longest time.Duration
	for _, a := range agents {
		name := spec.UserName(a.ID)
		key, ok := keys[name]
		if !ok {
			continue
		}
		c.Users = append(c.Users, agentUser(a, name, key))
		if a.Role == spec.RoleWorker {
			c.Tasks.Workers = append(c.Tasks.Workers, a.ID)
			longest = max(longest, a.TaskTimeout)
		}
	}
	if longest > 0 {
		c.Tasks.ResultWindow = resultWindow(c.Tasks.MaxDeliveries, longest, c.Tasks.AckWait)
	}
	if key, ok := keys[OperatorName]; ok {
		c.Users = append(c.Users, User{Name: OperatorName, Nkey: key, Publish: []string{">"}, Subscribe: []string{">"}})
	}
	return c
}

// agentUser grants what a's role needs: every agent speaks under its own
// name and hears its own inbox (where JetStream's answers come too); the
// role adds the task flow.
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
		u.Subscribe = append(u.Subscribe, wire.Broadcast)
		// Results are stored through JetStream (the answer, a PubAck,
		// comes to the worker's inbox).
		u.Publish = append(u.Publish, wire.ResultSubject)
		u.Publish = append(u.Publish, pullGrants(wire.RoleConsumer(string(spec.RoleWorker)))...)
		u.Publish = append(u.Publish, pullGrants(wire.AgentConsumer(a.ID))...)
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

// pullGrants is what pulling tasks from consumer takes, and nothing more:
// reading the consumer's info (binding to it), asking for the next
// message (the answer comes to the worker's inbox), and acknowledging
// what it was handed (the $JS.ACK reply of each message, under the
// consumer's name). No stream API: a worker cannot create, delete or purge
// a stream or consumer, nor read a stream's messages directly.
func pullGrants(consumer string) []string {
	return []string{
		"$JS.API.CONSUMER.INFO." + wire.TasksStream + "." + consumer,
		"$JS.API.CONSUMER.MSG.NEXT." + wire.TasksStream + "." + consumer,
		"$JS.ACK." + wire.TasksStream + "." + consumer + ".>",
	}
}

func sorted(l []string) []string {
	slices.Sort(l)
	return slices.Compact(l)
}
