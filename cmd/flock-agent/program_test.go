package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/syncbuf"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Task mode end to end, in process, on flock's own bus: started event, a
// task taken from the queue and its result (the command's output) stored,
// and on the end of ctx a stopping event and a clean return.
// Tier: unit (no root).
func TestServeTaskMode(t *testing.T) {
	agentKey, agentSeed := user(t)
	testerKey, _ := user(t)
	f := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: -1},
		Agents: []spec.Agent{{ID: 5, Role: spec.RoleWorker, TaskTimeout: 5 * time.Second}}}
	s, err := bus.Start(bus.ForFlock(f, map[string]string{"flock-5": pub(t, agentKey), creds.OperatorName: pub(t, testerKey)}),
		bus.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	url := s.ClientURL()
	tester, err := nats.Connect(url, nats.Nkey(pub(t, testerKey), testerKey.Sign))
	if err != nil {
		t.Fatal(err)
	}
	defer tester.Close()
	events, _ := tester.SubscribeSync(wire.Events(5))
	_ = tester.Flush()

	var logs syncbuf.Buffer
	env := agent.Env{ID: 5, Role: "worker", NATSURL: url, NKeyFile: agentSeed, Home: t.TempDir(),
		Heartbeat: time.Hour, TaskTimeout: 5 * time.Second, MaxOutput: 1000}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, env, invocation{modeTask, []string{"tr", "a-z", "A-Z"}}, true, slog.New(slog.NewJSONHandler(&logs, nil)))
	}()

	if kind := nextEvent(t, events); kind != "started" {
		t.Fatalf("first event %q", kind)
	}
	// Stored before the agent pulls or after: it is queued either way.
	sent, err := operator.SendTask(ctx, tester, wire.RoleTasks("worker"), "t-9", []byte("shout"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	res, err := operator.WaitResult(wctx, tester, "t-9", sent.At)
	if err != nil || !res.OK || res.Output != "SHOUT" || res.TaskID != "t-9" || res.Agent != 5 {
		t.Errorf("result %+v, %v", res, err)
	}

	cancel()
	if kind := nextEvent(t, events); kind != "stopping" {
		t.Errorf("last event %q", kind)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return")
	}
	for _, want := range []string{`"msg":"agent started"`, `"ipc_scoped":true`, `"mode":"task"`,
		`"msg":"task done","task_id":"t-9","ok":true,"exit_status":0,"duration_ms":`, `"msg":"agent stopping"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// Without its credential the agent fails at once and says where it looked.
// Tier: unit (no root).
func TestServeWithoutCredential(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nats")
	env := agent.Env{ID: 5, NATSURL: "nats://127.0.0.1:1", NKeyFile: missing}
	err := serve(context.Background(), env, invocation{mode: modeDefault}, false, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "no NATS credential at "+missing+": ") {
		t.Errorf("got %v", err)
	}
}

func user(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	file := filepath.Join(t.TempDir(), "nats")
	if err := os.WriteFile(file, seed, 0o400); err != nil {
		t.Fatal(err)
	}
	return kp, file
}

func pub(t *testing.T, kp nkeys.KeyPair) string {
	t.Helper()
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nextEvent(t *testing.T, sub *nats.Subscription) string {
	t.Helper()
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("waiting for an event: %v", err)
	}
	var ev wire.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Kind
}
