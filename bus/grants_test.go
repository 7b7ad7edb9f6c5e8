package bus

// Tier: unit (no root).

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// TestPermissionMatrix checks what each role may say and hear, against a
// real server: a refused publish is reported to the client and reaches
// nobody; a refused subscription is reported and hears nothing.
//
// Tier: unit (no root).
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	op := connect(t, s, ids, creds.OperatorName)
	heard := record(t, op, ">")
	agents := map[int]*client{}
	for _, id := range []int{1, 2, 3} {
		agents[id] = connect(t, s, ids, spec.UserName(id))
	}

	const refused = "Permissions Violation for "
	for _, tc := range []struct {
		name  string
		agent int
		pub   string // publish here, or
		sub   string // subscribe here
		probe string // (subscriptions) a subject sub matches, published by the operator
		want  string // "" = allowed, else the violation the agent is told of
	}{
		{name: "worker speaks as another agent", agent: 2, pub: "agent.1.heartbeat", want: refused + `Publish to "agent.1.heartbeat"`},
		{name: "worker reads another agent's inbox", agent: 2, sub: "_INBOX.flock-1.>", probe: "_INBOX.flock-1.x", want: refused + `Subscription to "_INBOX.flock-1.>"`},
		{name: "worker reads every inbox", agent: 2, sub: "_INBOX.>", probe: "_INBOX.flock-1.y", want: refused + `Subscription to "_INBOX.>"`},
		{name: "worker publishes its heartbeat", agent: 2, pub: "agent.2.heartbeat"},
		{name: "worker publishes its events", agent: 2, pub: "agent.2.events"},
		// Results, acknowledgements and pulls go through the bus's task
		// desk (desk.go), asked under the worker's own name: a worker
		// touches no JetStream subject, so it cannot store a result for a
		// task it does not hold, nor ack, nak or end another's delivery.
		{name: "worker publishes a result", agent: 2, pub: wire.ResultSubject, want: refused + `Publish to "task.result"`},
		{name: "worker acknowledges a task", agent: 2, pub: "$JS.ACK.TASKS.worker.1.1.1.1.0", want: refused + `Publish to "$JS.ACK.TASKS.worker.1.1.1.1.0"`},
		{name: "worker ends a task", agent: 2, pub: "$JS.ACK.TASKS.agent-2.1.1.1.1.0", want: refused + `Publish to "$JS.ACK.TASKS.agent-2.1.1.1.1.0"`},
		{name: "worker pulls from the shared consumer", agent: 2, pub: "$JS.API.CONSUMER.MSG.NEXT.TASKS.worker", want: refused + `Publish to "$JS.API.CONSUMER.MSG.NEXT.TASKS.worker"`},
		{name: "worker asks another agent's desk", agent: 2, pub: wire.Desk(1, wire.DeskResult), want: refused + `Publish to "agent.1.task.result"`},
		{name: "worker publishes its granted subject", agent: 2, pub: "reports.daily"},
		{name: "worker hands out tasks", agent: 2, pub: "tasks.worker", want: refused + `Publish to "tasks.worker"`},
		{name: "worker answers a request it never got", agent: 2, pub: "_INBOX.flock-1.never", want: refused + `Publish to "_INBOX.flock-1.never"`},
		// Tasks come only through the bus's consumers (perms_jetstream_test.go):
		// a plain subscription would see every task without taking it.
		{name: "worker hears its role's tasks around the queue", agent: 2, sub: "tasks.worker", probe: "tasks.worker", want: refused + `Subscription to "tasks.worker"`},
		{name: "worker hears its own tasks around the queue", agent: 2, sub: "tasks.agent.2", probe: "tasks.agent.2", want: refused + `Subscription to "tasks.agent.2"`},
		{name: "worker hears another agent's tasks", agent: 2, sub: "tasks.agent.1", probe: "tasks.agent.1", want: refused + `Subscription to "tasks.agent.1"`},
		{name: "worker hears broadcasts", agent: 2, sub: wire.Broadcast, probe: wire.Broadcast},
		{name: "worker hears its own inbox", agent: 2, sub: "_INBOX.flock-2.>", probe: "_INBOX.flock-2.z"},
		{name: "worker hears results", agent: 2, sub: wire.ResultSubject, probe: wire.ResultSubject, want: refused + `Subscription to "task.result"`},
		{name: "monitor publishes a result", agent: 3, pub: wire.ResultSubject, want: refused + `Publish to "task.result"`},
		{name: "monitor publishes its heartbeat", agent: 3, pub: "agent.3.heartbeat"},
		{name: "monitor hears heartbeats", agent: 3, sub: wire.AllHeartbeats, probe: "agent.2.heartbeat"},
		{name: "monitor hears events", agent: 3, sub: wire.AllEvents, probe: "agent.1.events"},
		{name: "monitor hears tasks", agent: 3, sub: "tasks.>", probe: "tasks.worker", want: refused + `Subscription to "tasks.>"`},
		// Tasks go through the desk, within the orchestrator's share.
		{name: "orchestrator stores a task itself", agent: 1, pub: "tasks.worker", want: refused + `Publish to "tasks.worker"`},
		{name: "orchestrator addresses one agent itself", agent: 1, pub: "tasks.agent.2", want: refused + `Publish to "tasks.agent.2"`},
		{name: "orchestrator sends a task through the desk", agent: 1, pub: "agent.1.task.send"},
		{name: "orchestrator broadcasts", agent: 1, pub: wire.Broadcast},
		{name: "orchestrator publishes a result", agent: 1, pub: wire.ResultSubject, want: refused + `Publish to "task.result"`},
		{name: "orchestrator speaks as a worker", agent: 1, pub: "agent.2.events", want: refused + `Publish to "agent.2.events"`},
		{name: "orchestrator hears results", agent: 1, sub: wire.ResultSubject, probe: wire.ResultSubject},
		{name: "orchestrator hears events", agent: 1, sub: wire.AllEvents, probe: "agent.3.events"},
		{name: "orchestrator hears heartbeats", agent: 1, sub: wire.AllHeartbeats, probe: "agent.3.heartbeat", want: refused + `Subscription to "agent.*.heartbeat"`},
		{name: "orchestrator reads the default inbox", agent: 1, sub: "_INBOX.abc.>", probe: "_INBOX.abc.d", want: refused + `Subscription to "_INBOX.abc.>"`},
		{name: "orchestrator asks the bus to reload", agent: 1, pub: wire.ReloadSubject, want: refused + `Publish to "flock.bus.reload"`},
		{name: "worker asks the bus to reload", agent: 2, pub: wire.ReloadSubject, want: refused + `Publish to "flock.bus.reload"`},
		{name: "monitor asks the bus to reload", agent: 3, pub: wire.ReloadSubject, want: refused + `Publish to "flock.bus.reload"`},
		{name: "worker asks the bus's status", agent: 2, pub: wire.StatusSubject, want: refused + `Publish to "flock.bus.status"`},
		// Every bus answers flock.bus.units with its host's units: only the
		// operator may ask, and no agent may answer in a bus's name.
		{name: "orchestrator asks every bus for its units", agent: 1, pub: wire.UnitsSubject, want: refused + `Publish to "flock.bus.units"`},
		{name: "worker asks every bus for its units", agent: 2, pub: wire.UnitsSubject, want: refused + `Publish to "flock.bus.units"`},
		{name: "monitor hears the units requests", agent: 3, sub: wire.UnitsSubject, probe: wire.UnitsSubject, want: refused + `Subscription to "flock.bus.units"`},
		{name: "orchestrator hears the bus's requests", agent: 1, sub: "flock.bus.>", probe: wire.StatusSubject, want: refused + `Subscription to "flock.bus.>"`},
		{name: "worker hears the bus's requests", agent: 2, sub: "flock.bus.>", probe: wire.StatusSubject, want: refused + `Subscription to "flock.bus.>"`},
		{name: "monitor hears the bus's requests", agent: 3, sub: "flock.bus.>", probe: wire.StatusSubject, want: refused + `Subscription to "flock.bus.>"`},
		{name: "worker writes a dead letter", agent: 2, pub: wire.DeadSubject, want: refused + `Publish to "flock.dead.tasks"`},
		{name: "orchestrator writes a dead letter", agent: 1, pub: wire.DeadSubject, want: refused + `Publish to "flock.dead.tasks"`},
		// The cost of each task is the proxy's and the desk's to tell:
		// no agent asks which tasks an agent holds, nor what one spent.
		{name: "worker asks which tasks it holds", agent: 2, pub: wire.LeasesSubject(2), want: refused + `Publish to "flock.bus.leases.2"`},
		{name: "orchestrator asks which tasks a worker holds", agent: 1, pub: wire.LeasesSubject(2), want: refused + `Publish to "flock.bus.leases.2"`},
		{name: "worker asks the proxy what a task spent", agent: 2, pub: wire.TaskSpendSubject(2), want: refused + `Publish to "flock.proxy.spend.2"`},
		{name: "worker hears what tasks spent", agent: 2, sub: wire.TaskSpendSubjects, probe: wire.TaskSpendSubject(2), want: refused + `Subscription to "flock.proxy.spend.*"`},
		{name: "monitor hears what tasks spent", agent: 3, sub: wire.TaskSpendSubjects, probe: wire.TaskSpendSubject(2), want: refused + `Subscription to "flock.proxy.spend.*"`},
		{name: "orchestrator reads the proxy's inbox", agent: 1, sub: wire.ProxyInbox + ".>", probe: wire.ProxyInbox + ".x", want: refused + `Subscription to "_INBOX.flock-proxy.>"`},
		{name: "worker hears JetStream's advisories", agent: 2, sub: "$JS.EVENT.ADVISORY.>", probe: "$JS.EVENT.ADVISORY.x", want: refused + `Subscription to "$JS.EVENT.ADVISORY.>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agents[tc.agent]
			marker := wire.Events(tc.agent) // every agent may publish it, the operator hears it
			if tc.pub != "" {
				if err := a.Publish(tc.pub, []byte(tc.name)); err != nil {
					t.Fatal(err)
				}
				if tc.want == "" {
					heard.waitMsg(t, tc.pub, tc.name)
					return
				}
				a.waitErr(t, tc.want)
				// Messages of one connection arrive in order: had the
				// refused one been delivered, it would precede the marker.
				if err := a.Publish(marker, []byte("after "+tc.name)); err != nil {
					t.Fatal(err)
				}
				for _, m := range heard.waitMsg(t, marker, "after "+tc.name) {
					if m.Subject == tc.pub && string(m.Data) == tc.name {
						t.Fatalf("the refused message on %s was delivered", tc.pub)
					}
				}
				return
			}
			sub, err := a.SubscribeSync(tc.sub)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if err := op.Publish(tc.probe, []byte(tc.name)); err != nil {
					t.Fatal(err)
				}
				m, err := sub.NextMsg(5 * time.Second)
				if err != nil || string(m.Data) != tc.name {
					t.Fatalf("the subscription to %s did not hear %s: %v", tc.sub, tc.probe, err)
				}
				return
			}
			a.waitErr(t, tc.want)
			// The agent's own inbox is in order with the probe: once the
			// marker arrived, a delivered probe would be pending.
			inbox, err := a.SubscribeSync(wire.Inbox(tc.agent) + ".marker")
			if err != nil {
				t.Fatal(err)
			}
			defer inbox.Unsubscribe()
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := op.Publish(tc.probe, []byte(tc.name)); err != nil {
				t.Fatal(err)
			}
			if err := op.Publish(wire.Inbox(tc.agent)+".marker", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := inbox.NextMsg(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			if n, _, err := sub.Pending(); err == nil && n > 0 {
				t.Fatalf("the refused subscription to %s heard %s", tc.sub, tc.probe)
			}
		})
	}
}

// TestNoOneAnswersRequests checks that no agent may answer a request it
// received (there is no allow_responses): the reply subject is the
// sender's choice, and answering would let an orchestrator make a worker
// speak where its role may not. Results go to task.result.
//
// Tier: unit (no root).
func TestNoOneAnswersRequests(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	orch, worker := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-2")
	heard, err := worker.SubscribeSync(wire.Broadcast)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	inbox := orch.NewInbox()
	replies, err := orch.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.PublishRequest(wire.Broadcast, inbox, []byte("answer me")); err != nil {
		t.Fatal(err)
	}
	m, err := heard.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Respond([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	worker.waitErr(t, `Permissions Violation for Publish to "`+inbox+`"`)
	if m, err := replies.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("the orchestrator got an answer: %q", m.Data)
	}
}

// TestUnknownClientsRefused checks there is no anonymous access and a key
// the bus does not know is refused.
//
// Tier: unit (no root).
func TestUnknownClientsRefused(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	s := startBus(t, ForFlock(testFlock(), ids.keys()), Options{})
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	strangerPub, _ := stranger.PublicKey()
	realPub, _ := ids["flock-2"].PublicKey()
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"anonymous", nil},
		{"user and password", []nats.Option{nats.UserInfo("flock-2", "secret")}},
		{"a seed the bus does not know", []nats.Option{nats.Nkey(strangerPub, stranger.Sign)}},
		{"a real public key signed with another seed", []nats.Option{nats.Nkey(realPub, stranger.Sign)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(s.ClientURL(), append(tc.opts, nats.NoReconnect())...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("refused with %v, want an authorization violation", err)
			}
		})
	}
}
