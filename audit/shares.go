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

// sharesProbes flood a's shares of the bus and, where it reaches the
// proxy, of the proxy's handshakes, each after the rest of the batch and
// alone (Request.Alone): beyond each share it must be refused. Their
// controls do the same within what is allowed: on the bus as the
// operator, who has no share, within what a connection may hold; at the
// proxy, which serves agents alone, as the agent's uid from outside its
// unit (probe.DialAs), within its share. The proxy's tunnels are not
// probed here (a control would need a tunnel that carries, and the
// agent's own program or a model gateway client may hold tunnels at
// any time); the system tier floods them (TestShares).
func sharesProbes(f *spec.Flock, a spec.Agent) []Probe {
	url, op := f.Bus.URL(), spec.CredPath(creds.OperatorName)
	asOp := func(r probe.Request) probe.Request { r.Addr, r.Path, r.Alone = url, op, true; return r }
	var ps []Probe
	add := func(name string, req, control probe.Request) {
		req.Alone = true
		ps = append(ps, Probe{Name: name, Category: "shares", Req: req, Control: asOp(control)})
	}
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
	// Last of the bus's: the server counts a connection the flood closed
	// until it has read the close, and a probe that connected at once
	// after it could be refused as over the share, before holding
	// anything (unproven).
	conns := probe.Request{Op: "nats-connections", Count: a.Shares.Connections + 1}
	add("hold more bus connections than its share", conns, conns)
	if a.NeedsProxy() {
		// A request that never ends ("CONNECT <name>" with no line end):
		// the proxy holds each as a handshake until its deadline.
		hs := probe.Request{Op: "proxy-handshakes", Addr: spec.DefaultProxyListen, Name: "flock-audit.invalid:443",
			Count: a.Shares.Handshakes + 1, Alone: true}
		control := hs
		control.Count, control.Key = a.Shares.Handshakes, int(f.UID(a.ID))
		ps = append(ps, Probe{Name: "hold more proxy handshakes than its share", Category: "shares", Req: hs, Control: control})
	}
	return ps
}

// Purge is the request, as the operator, that removes the audit's tasks
// from TASKS once every agent's floods are done.
func Purge(f *spec.Flock) probe.Request {
	return probe.Request{Op: "nats-request", Addr: f.Bus.URL(), Path: spec.CredPath(creds.OperatorName),
		Name: "$JS.API.STREAM.PURGE." + wire.TasksStream, Data: `{"filter":"` + AuditTasks + `.>"}`}
}
