package audit

import (
	"strconv"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// AuditTasks are the subjects of the tasks the audit's floods send: no
// worker takes them, and the audit purges them from TASKS when done
// (Purge).
const AuditTasks = "tasks.flock-audit"

// taskChunk is the size of each task an orchestrator's flood sends: its
// share of bytes filled in a few sends.
const taskChunk = 4 << 20

// sharesProbes flood a's shares of the bus, each after the rest of the
// batch and alone (Request.Alone): beyond each share it must be refused.
// Their controls, as the operator, who has no share, do the same within
// what a connection may hold. The proxy's shares are not probed here:
// no control outside an agent can reach the proxy (it serves agents
// alone); the system tier floods them (TestShares).
func sharesProbes(f *spec.Flock, a spec.Agent) []Probe {
	url, op := f.Bus.URL(), spec.CredPath(creds.OperatorName)
	asOp := func(r probe.Request) probe.Request { r.Addr, r.Path, r.Alone = url, op, true; return r }
	var ps []Probe
	add := func(name string, req, control probe.Request) {
		req.Alone = true
		ps = append(ps, Probe{Name: name, Category: "shares", Req: req, Control: asOp(control)})
	}
	conns := probe.Request{Op: "nats-connections", Count: a.Shares.Connections + 1}
	add("hold more bus connections than its share", conns, conns)
	add("subscribe beyond what a connection may hold",
		probe.Request{Op: "nats-subscriptions", Name: wire.Inbox(a.ID) + ".flock-audit", Count: f.Bus.MaxSubscriptions + 1},
		probe.Request{Op: "nats-subscriptions", Name: "flock.audit.subscriptions", Count: f.Bus.MaxSubscriptions - 1})
	add("send a message larger than the bus carries",
		probe.Request{Op: "nats-oversize", Name: wire.Events(a.ID), Size: spec.MaxMessage + 1},
		probe.Request{Op: "nats-oversize", Name: "flock.audit.oversize", Size: 1 << 10})
	if a.Role == spec.RoleOrchestrator {
		n := min(a.Shares.Tasks, int((a.Shares.TaskBytes+taskChunk-1)/taskChunk)) + 1
		add("send more tasks than its share of TASKS",
			probe.Request{Op: "desk-send", Name: AuditTasks + "." + strconv.Itoa(a.ID), Count: n, Size: taskChunk, TimeoutMS: 60_000},
			// The operator stores one such task itself (JetStream's
			// answer is the proof): its own sends have no share.
			probe.Request{Op: "nats-request", Name: AuditTasks + ".control", Data: "x"})
	}
	return ps
}

// Purge is the request, as the operator, that removes the audit's tasks
// from TASKS once every agent's floods are done.
func Purge(f *spec.Flock) probe.Request {
	return probe.Request{Op: "nats-request", Addr: f.Bus.URL(), Path: spec.CredPath(creds.OperatorName),
		Name: "$JS.API.STREAM.PURGE." + wire.TasksStream, Data: `{"filter":"` + AuditTasks + `.>"}`}
}
