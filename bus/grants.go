package bus

// What each user of a flock may say and hear on the bus: ForFlock makes
// the config's users from the spec, each role's grants in agentUser.
// permissions.go turns them into nats-server's.

import (
	"slices"
	"time"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// ForFlock is the bus f needs. keys maps user names to public nkeys, the
// operator's under creds.OperatorName (the reader's under
// creds.ReaderName); a user without a key is left out (its
// identity is not created yet), so ForFlock never invents an identity.
func ForFlock(f *spec.Flock, keys map[string]string) Config {
	c := Config{Listen: f.Bus.Listen(), Monitor: f.Bus.Monitor(), Metrics: f.Bus.Metrics(), UIDBase: f.UIDBase, Users: []User{}, Tasks: Tasks{
		StoreMax: int64(f.Bus.StoreMax), MaxDeliveries: f.Bus.MaxDeliveries, Sync: f.Bus.Sync, Workers: []int{}},
		MaxSubscriptions: f.Bus.MaxSubscriptions, MaxPending: int64(f.Bus.MaxPending)}
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
			if a.HasModels() {
				c.Tasks.Metered = append(c.Tasks.Metered, a.ID)
			}
			longest = max(longest, a.TaskTimeout)
		}
	}
	if longest > 0 {
		c.Tasks.ResultWindow = resultWindow(c.Tasks.MaxDeliveries, longest, c.Tasks.AckWait)
	}
	if key, ok := keys[creds.ProxyName]; ok {
		c.Users = append(c.Users, proxyUser(key))
	}
	if key, ok := keys[creds.ReaderName]; ok {
		c.Users = append(c.Users, ReaderUser(key))
	}
	if key, ok := keys[creds.OperatorName]; ok {
		c.Users = append(c.Users, User{Name: creds.OperatorName, Nkey: key, Publish: []string{">"}, Subscribe: []string{">"}})
	}
	return c
}

// readerConnections is the reader's share of connections: a few people
// running a verb or two at once.
const readerConnections = 32

// ReaderUser may do what flockctl's read-only verbs do and nothing else:
// ask each bus what it knows (status, the held tasks, the units, an
// agent's permissions), read the task streams (their info, their
// consumers, a message by sequence) and hear the agents' heartbeats and
// events. It sends no task, stores, purges or deletes nothing in
// JetStream, reloads no bus, answers no request (no responses at all),
// speaks under no agent's name and asks neither the desk's leases nor
// the proxy's spend. Its answers come to its own inbox.
func ReaderUser(key string) User {
	var pub []string
	for _, subj := range []string{wire.StatusSubject, wire.HeldSubject, wire.PermissionsSubject} {
		pub = append(pub, subj, wire.OnServer(subj, "*")) // each bus's own (wire.OnServer)
	}
	pub = append(pub, wire.UnitsSubject)
	for _, stream := range []string{wire.TasksStream, wire.ResultsStream, wire.DeadStream} {
		pub = append(pub, "$JS.API.STREAM.INFO."+stream, "$JS.API.STREAM.MSG.GET."+stream)
	}
	pub = append(pub, "$JS.API.CONSUMER.LIST."+wire.TasksStream)
	return User{Name: creds.ReaderName, Nkey: key, Connections: readerConnections,
		Publish:   sorted(pub),
		Subscribe: sorted([]string{wire.ReaderInbox + ".>", wire.AllHeartbeats, wire.AllEvents})}
}

// proxyConnections is the egress proxy's share of connections: it keeps
// one, and may overlap it with a reconnect.
const proxyConnections = 4

// proxyUser publishes flock-proxy's egress decisions and model counts,
// asks the desk which tasks a worker holds (its answers come to the
// proxy's own inbox), and hears and answers the desk's and the
// operator's questions of what a task spent.
func proxyUser(key string) User {
	return User{Name: creds.ProxyName, Nkey: key,
		Publish:     []string{wire.LeasesSubjects, wire.EgressSubjects, wire.UsageSubjects},
		Subscribe:   []string{wire.ProxyInbox + ".>", wire.TaskSpendSubjects},
		Connections: proxyConnections, ResponseTTL: time.Minute}
}

// agentUser grants what a's role needs: every agent speaks under its own
// name and hears its own inbox (where JetStream's answers come too); the
// role adds the task flow.
func agentUser(a spec.Agent, name, key string) User {
	u := User{
		Name:        name,
		Agent:       a.ID,
		Nkey:        key,
		Publish:     []string{wire.AgentSubjects(a.ID)},
		Subscribe:   []string{wire.Inbox(a.ID) + ".>"},
		Connections: a.Shares.Connections,
	}
	switch a.Role {
	case spec.RoleWorker:
		// Tasks come from the bus's task desk, asked on agent.N.task.*
		// (under its own name), and the answers to its inbox: a worker
		// touches no JetStream subject at all (desk.go).
		u.Subscribe = append(u.Subscribe, wire.Broadcast)
	case spec.RoleOrchestrator:
		// Tasks go through the desk too (agent.N.task.send), which
		// stores them within the orchestrator's share of TASKS.
		u.Publish = append(u.Publish, wire.Broadcast)
		u.Tasks, u.TaskBytes = a.Shares.Tasks, int64(a.Shares.TaskBytes)
		u.Subscribe = append(u.Subscribe, wire.ResultSubject, wire.AllEvents)
	case spec.RoleMonitor:
		// Monitors hear every decision of the egress proxy too.
		u.Subscribe = append(u.Subscribe, wire.AllHeartbeats, wire.AllEvents, wire.EgressSubjects)
	}
	u.Publish = sorted(append(u.Publish, a.Subjects.Publish...))
	u.Subscribe = sorted(append(u.Subscribe, a.Subjects.Subscribe...))
	return u
}

func sorted(l []string) []string {
	slices.Sort(l)
	return slices.Compact(l)
}
