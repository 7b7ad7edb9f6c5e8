package bus

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// TestReaderGrants checks the reader's grants (ReaderUser) against a real
// server: it asks the bus what it knows, lists the tasks and hears the
// agents' events; it cannot send a task (through the desk or around it),
// take one, purge or delete a stream or a message, create or delete a
// consumer, speak under an agent's name, answer a request, reload the
// bus, ask the desk's leases or the proxy's spend, nor hear the tasks,
// the results or anyone's inbox. Each refusal is the server's, and the
// streams are as before.
//
// Tier: unit (no root).
func TestReaderGrants(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyoneAnd4, creds.ReaderName)...)
	s := taskBus(t, ids, Options{}, func(c *Config) { c.Tasks.AckWait = time.Minute })
	op := connect(t, s, ids, creds.OperatorName)
	orch, w4 := connect(t, s, ids, "flock-1"), connect(t, s, ids, "flock-4")
	reader := connect(t, s, ids, creds.ReaderName, nats.CustomInboxPrefix(wire.ReaderInbox))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Controls: agent 4 finishes one task and another waits.
	for _, id := range []string{"done-1", "waiting-2"} {
		if _, err := agent.SendTask(ctx, orch.Conn, 1, wire.AgentTasks(4), id, []byte("task")); err != nil {
			t.Fatalf("control: the orchestrator stores task %s: %v", id, err)
		}
	}
	held, ok := ask(t, w4, 4, time.Second)
	if !ok {
		t.Fatal("control: agent 4 is handed its task")
	}
	if got := say(t, w4, 4, wire.DeskResult, held.Lease, resultBody(wire.Result{OK: true})); got != "" {
		t.Fatalf("control: agent 4 hands in its result: refused %q", got)
	}

	t.Run("lists the tasks", func(t *testing.T) {
		entries, err := operator.ListTasks(ctx, reader.Conn, 10)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]operator.TaskState{}
		for _, e := range entries {
			states[e.ID] = e.State
		}
		if states["done-1"] != operator.Done || states["waiting-2"] != operator.Pending {
			t.Errorf("tasks %v, want done-1 done and waiting-2 pending", states)
		}
	})
	t.Run("hears the agents' events and heartbeats", func(t *testing.T) {
		events, beats := record(t, reader, wire.AllEvents), record(t, reader, wire.AllHeartbeats)
		if err := orch.Publish(wire.Events(1), []byte("did a thing")); err != nil {
			t.Fatal(err)
		}
		if err := w4.Publish(wire.Heartbeat(4), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		events.waitMsg(t, wire.Events(1), "did a thing")
		beats.waitMsg(t, wire.Heartbeat(4), "{}")
	})
	t.Run("asks the bus", func(t *testing.T) {
		for _, tc := range []struct {
			subject string
			body    []byte
			check   func([]byte) error
		}{
			{wire.StatusSubject, nil, func(b []byte) error { var st wire.BusStatus; return json.Unmarshal(b, &st) }},
			{wire.HeldSubject, nil, func(b []byte) error { _, err := wire.ParseHeld(b); return err }},
			{wire.PermissionsSubject, wire.PermissionsRequest(4), func(b []byte) error { _, err := wire.ParsePermissions(b); return err }},
			{wire.UnitsSubject, nil, func(b []byte) error { var u wire.HostUnits; return json.Unmarshal(b, &u) }},
		} {
			m, err := reader.Request(tc.subject, tc.body, 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", tc.subject, err)
			}
			if err := tc.check(m.Data); err != nil {
				t.Errorf("%s answered %q: %v", tc.subject, m.Data, err)
			}
		}
	})

	before := jsState(t, ctx, op)
	const refused = "Permissions Violation for "
	for _, tc := range []struct{ name, subject, body string }{
		{"sends a task through a desk", wire.Desk(1, wire.DeskSend), "task"},
		{"stores a task around the desk", wire.RoleTasks("worker"), "task"},
		{"takes a task", wire.Desk(4, wire.DeskNext), `{"wait_ms":100}`},
		{"pulls a task from a consumer", "$JS.API.CONSUMER.MSG.NEXT.TASKS.agent-4", `{"batch":1}`},
		{"stores a result", wire.ResultSubject, `{"task_id":"waiting-2","ok":true}`},
		{"purges the task stream", "$JS.API.STREAM.PURGE.TASKS", ""},
		{"purges the results", "$JS.API.STREAM.PURGE.RESULTS", ""},
		{"deletes the task stream", "$JS.API.STREAM.DELETE.TASKS", ""},
		{"deletes a task", "$JS.API.STREAM.MSG.DELETE.TASKS", `{"seq":2}`},
		{"deletes a consumer", "$JS.API.CONSUMER.DELETE.TASKS.agent-4", ""},
		{"creates a consumer", "$JS.API.CONSUMER.CREATE.TASKS.mine.tasks.agent.4", `{"stream_name":"TASKS","config":{"durable_name":"mine","filter_subject":"tasks.agent.4","ack_policy":"explicit"}}`},
		{"creates a stream", "$JS.API.STREAM.CREATE.MINE", `{"name":"MINE","subjects":["mine.>"]}`},
		{"speaks as an agent", wire.Heartbeat(2), "{}"},
		{"tells an agent's events", wire.Events(2), "forged"},
		{"broadcasts", wire.Broadcast, "hello"},
		{"answers an agent's request", wire.Inbox(1) + ".x", "forged"},
		{"reloads the bus", wire.ReloadSubject, ""},
		{"asks the desk's leases", wire.LeasesSubject(4), ""},
		{"asks the proxy's spend", wire.TaskSpendSubject(4), ""},
		{"tells a task gone", wire.TaskGoneSubject, "waiting-2"},
	} {
		t.Run("never "+tc.name, func(t *testing.T) {
			replies, err := reader.SubscribeSync(reader.NewInbox())
			if err != nil {
				t.Fatal(err)
			}
			defer replies.Unsubscribe()
			if err := reader.PublishRequest(tc.subject, replies.Subject, []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			reader.waitErr(t, refused+`Publish to "`+tc.subject+`"`)
			// The refusal came before the answer to a flush: had the
			// server acted, its answer would be waiting.
			if err := reader.Flush(); err != nil {
				t.Fatal(err)
			}
			if m, err := replies.NextMsg(50 * time.Millisecond); err == nil {
				t.Errorf("answered: %q", m.Data)
			}
		})
	}
	for _, subject := range []string{wire.TasksAll, wire.ResultSubject, "_INBOX.>", wire.Inbox(4) + ".>", wire.EgressSubjects, wire.UsageSubjects, wire.DeskAll} {
		t.Run("never hears "+subject, func(t *testing.T) {
			if _, err := reader.SubscribeSync(subject); err != nil {
				t.Fatal(err)
			}
			reader.waitErr(t, refused+`Subscription to "`+subject+`"`)
		})
	}
	if after := jsState(t, ctx, op); !after.equal(before) {
		t.Errorf("the streams changed under refused requests:\n before %+v\n after  %+v", before, after)
	}
}

// System as the reader connects with the reader's seed and inbox, and
// asks what the read-only verbs ask.
//
// Tier: unit (no root).
func TestSystemAsReader(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, append(everyone, creds.ReaderName)...)
	c := ForFlock(testFlock(), ids.keys())
	s := startBus(t, c, Options{})
	dir := t.TempDir()
	store := creds.Store{Dir: filepath.Join(dir, "creds")}
	if err := os.Mkdir(store.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{creds.ReaderName, creds.OperatorName} {
		seed, _ := ids[name].Seed()
		if err := os.WriteFile(store.Path(name), append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.Listen = strings.TrimPrefix(s.ClientURL(), "nats://")
	path := filepath.Join(dir, "bus.json")
	if err := WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, as := range []string{creds.ReaderName, ""} {
		sys := &System{Store: store, ConfigPath: path, As: as}
		if _, err := sys.Status(ctx); err != nil {
			t.Errorf("as %q: status: %v", as, err)
		}
		if p, err := sys.Permissions(ctx, 2); err != nil || p.Agent != 2 {
			t.Errorf("as %q: permissions of agent 2: %+v, %v", as, p, err)
		}
	}
	if err := os.Remove(store.Path(creds.ReaderName)); err != nil {
		t.Fatal(err)
	}
	if _, err := (&System{Store: store, ConfigPath: path, As: creds.ReaderName}).Status(ctx); err == nil || !strings.Contains(err.Error(), "the reader's bus credential") {
		t.Errorf("without the reader's seed: %v, want the credential named", err)
	}
}
