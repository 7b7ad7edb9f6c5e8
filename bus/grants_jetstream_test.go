package bus

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

// TestJetStreamAttacks checks what agents may do with the bus's streams,
// against a real server: a worker touches no JetStream subject at all (its
// tasks come through the bus's task desk, desk.go), so it may not bind to
// or pull from any consumer, its own included, acknowledge, nak or end any
// delivery (the one it holds included: the ack subject is in its lease,
// and guessable), store a result around the desk, create or delete a
// consumer, delete or purge a stream, or read a stream directly; an
// orchestrator may store tasks and nothing else of JetStream. Each refusal
// is the server's (the agent is told), and the streams are as before.
//
// Tier: unit (no root).
func TestJetStreamAttacks(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyoneAnd4...)
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = time.Minute })
	op := connect(t, s, ids, creds.OperatorName)
	orch, w2, w4, mon := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-2"), connect(t, s, ids, "flock-4"), connect(t, s, ids, "flock-3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Controls: the orchestrator stores two tasks for agent 4 and one for
	// any worker; agent 4 takes the first of its own from the desk.
	for _, subj := range []string{wire.AgentTasks(4), wire.AgentTasks(4), wire.RoleTasks("worker")} {
		if _, err := agent.SendTask(ctx, orch.Conn, 1, subj, "", []byte("task")); err != nil {
			t.Fatalf("control: the orchestrator stores a task on %s: %v", subj, err)
		}
	}
	held, ok := ask(t, w4, 4, time.Second)
	if !ok {
		t.Fatal("control: agent 4 is handed its task")
	}
	enc, _, _ := strings.Cut(held.Lease, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	ackSubject := string(raw)
	// Settled first: under load the desk's pull for agent 4 may still be
	// landing (an answer counted as ack-pending a moment later), and that
	// is no doing of the refused requests below.
	before := jsState(t, ctx, op)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := jsState(t, ctx, op)
		if now.equal(before) {
			break
		}
		before = now
	}

	const refused = "Permissions Violation for Publish to "
	for _, tc := range []struct {
		name    string
		who     *client
		subject string
		body    string
	}{
		{"a worker binds to another agent's consumer", w2, "$JS.API.CONSUMER.INFO.TASKS.agent-4", ""},
		{"a worker pulls from another agent's consumer", w2, "$JS.API.CONSUMER.MSG.NEXT.TASKS.agent-4", `{"batch":1}`},
		{"a worker binds to its own consumer", w4, "$JS.API.CONSUMER.INFO.TASKS.agent-4", ""},
		{"a worker pulls from its own consumer", w4, "$JS.API.CONSUMER.MSG.NEXT.TASKS.agent-4", `{"batch":1}`},
		{"a worker pulls from the shared consumer", w2, "$JS.API.CONSUMER.MSG.NEXT.TASKS.worker", `{"batch":1}`},
		{"a worker acknowledges another worker's task", w2, ackSubject, "+ACK"},
		{"a worker gives another worker's task back", w2, ackSubject, "-NAK"},
		{"a worker ends another worker's task", w2, ackSubject, "+TERM"},
		{"a worker acknowledges its task around the desk", w4, ackSubject, "+ACK"},
		{"a worker stores a result around the desk", w2, wire.ResultSubject, `{"task_id":"seq-1","ok":true}`},
		{"a worker creates a consumer", w2, "$JS.API.CONSUMER.CREATE.TASKS.mine.tasks.agent.4", `{"stream_name":"TASKS","config":{"durable_name":"mine","filter_subject":"tasks.agent.4","ack_policy":"explicit"}}`},
		{"a worker changes the shared consumer", w2, "$JS.API.CONSUMER.CREATE.TASKS.worker.tasks.worker", `{"stream_name":"TASKS","config":{"durable_name":"worker","filter_subject":"tasks.worker","ack_policy":"explicit","max_deliver":1}}`},
		{"a worker creates a durable consumer (old API)", w2, "$JS.API.CONSUMER.DURABLE.CREATE.TASKS.mine", `{"stream_name":"TASKS","config":{"durable_name":"mine"}}`},
		{"a worker deletes a consumer", w2, "$JS.API.CONSUMER.DELETE.TASKS.agent-4", ""},
		{"a worker deletes the task stream", w2, "$JS.API.STREAM.DELETE.TASKS", ""},
		{"a worker purges the task stream", w2, "$JS.API.STREAM.PURGE.TASKS", ""},
		{"a worker deletes a task", w2, "$JS.API.STREAM.MSG.DELETE.TASKS", `{"seq":1}`},
		{"a worker reads a task directly", w2, "$JS.API.STREAM.MSG.GET.TASKS", `{"seq":2}`},
		{"a worker reads the results directly", w2, "$JS.API.DIRECT.GET.RESULTS", `{"seq":1}`},
		{"a worker reads a dead letter", w2, "$JS.API.STREAM.MSG.GET.DEAD", `{"seq":1}`},
		{"a worker lists the streams", w2, "$JS.API.STREAM.NAMES", ""},
		{"a worker creates a stream", w2, "$JS.API.STREAM.CREATE.MINE", `{"name":"MINE","subjects":["agent.2.>"]}`},
		{"a worker deletes the results", w2, "$JS.API.STREAM.DELETE.RESULTS", ""},
		{"the orchestrator pulls workers' tasks", orch, "$JS.API.CONSUMER.MSG.NEXT.TASKS.worker", `{"batch":1}`},
		{"the orchestrator reads results' history", orch, "$JS.API.CONSUMER.CREATE.RESULTS", `{"stream_name":"RESULTS","config":{"ack_policy":"none"}}`},
		{"the orchestrator purges the results", orch, "$JS.API.STREAM.PURGE.RESULTS", ""},
		{"the monitor reads the task stream", mon, "$JS.API.STREAM.INFO.TASKS", ""},
		{"the monitor stores a task", mon, wire.AgentTasks(4), "task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies, err := tc.who.SubscribeSync(tc.who.NewInbox())
			if err != nil {
				t.Fatal(err)
			}
			defer replies.Unsubscribe()
			if err := tc.who.PublishRequest(tc.subject, replies.Subject, []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			tc.who.waitErr(t, refused+`"`+tc.subject+`"`)
			// The refusal came before the answer to a flush: had the
			// server acted, its answer would be waiting.
			if err := tc.who.Flush(); err != nil {
				t.Fatal(err)
			}
			if m, err := replies.NextMsg(50 * time.Millisecond); err == nil {
				t.Errorf("answered: %q", m.Data)
			}
		})
	}
	if after := jsState(t, ctx, op); !after.equal(before) {
		t.Errorf("the streams changed under refused requests:\n before %+v\n after  %+v", before, after)
	}
	// And the task held stays agent 4's: it hands in the result.
	if got := say(t, w4, 4, wire.DeskResult, held.Lease, resultBody(wire.Result{OK: true})); got != "" {
		t.Errorf("control: agent 4 hands in its result: refused %q", got)
	}
}

// jsStateOf is what the attacks must leave alone.
type jsStateOf struct {
	streams   []string
	consumers []string
	tasks     uint64
	pending   [2]uint64 // agent-4: not yet handed out, handed out and not acknowledged
}

func (a jsStateOf) equal(b jsStateOf) bool {
	return slices.Equal(a.streams, b.streams) && slices.Equal(a.consumers, b.consumers) && a.tasks == b.tasks && a.pending == b.pending
}

func jsState(t *testing.T, ctx context.Context, op *client) jsStateOf {
	t.Helper()
	js, err := jetstream.New(op.Conn)
	if err != nil {
		t.Fatal(err)
	}
	var st jsStateOf
	names := js.StreamNames(ctx)
	for n := range names.Name() {
		st.streams = append(st.streams, n)
	}
	tasks, err := js.Stream(ctx, wire.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	cs := tasks.ConsumerNames(ctx)
	for n := range cs.Name() {
		st.consumers = append(st.consumers, n)
	}
	slices.Sort(st.streams)
	slices.Sort(st.consumers)
	info, err := tasks.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.tasks = info.State.Msgs
	c, err := tasks.Consumer(ctx, wire.AgentConsumer(4))
	if err != nil {
		t.Fatal(err)
	}
	ci := c.CachedInfo()
	st.pending = [2]uint64{ci.NumPending, uint64(ci.NumAckPending)}
	return st
}
