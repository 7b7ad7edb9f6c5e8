package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/syncbuf"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/bus/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Task mode end to end, in process: started event, a task answered with
// the command's output, and on the end of ctx a stopping event and a
// clean return. Tier: unit (no root).
func TestServeTaskMode(t *testing.T) {
	agentKey, agentSeed := user(t)
	testerKey, _ := user(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub(t, agentKey)}, {Nkey: pub(t, testerKey)}}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := "nats://" + s.Addr().String()
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
	// Until the agent has subscribed, nobody responds: ask again.
	msg := nats.NewMsg(wire.RoleTasks("worker"))
	msg.Header.Set(wire.TaskIDHeader, "t-9")
	msg.Data = []byte("shout")
	var reply *nats.Msg
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if reply, err = tester.RequestMsg(msg, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	var res wire.Result
	if err := json.Unmarshal(reply.Data, &res); err != nil || !res.OK || res.Output != "SHOUT" || res.TaskID != "t-9" || res.Agent != 5 {
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
