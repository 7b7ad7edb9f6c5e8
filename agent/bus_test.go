package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/syncbuf"

	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Helpers for the tests that need a bus: an in-process nats-server with
// nkey users, an agent user permitted roughly as the bus permits one,
// and a tester user permitted everything.

type testUser struct {
	seedFile string
	pub      string
	kp       nkeys.KeyPair
}

func newUser(t *testing.T) testUser {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	file := filepath.Join(t.TempDir(), "nats")
	if err := os.WriteFile(file, seed, 0o400); err != nil {
		t.Fatal(err)
	}
	return testUser{file, pub, kp}
}

// agentPerms are an agent's: its own subjects and results out, its tasks
// and own inbox in, and replies to what it received.
func agentPerms(id int, role string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{wire.AgentSubjects(id), wire.ResultSubject}},
		Subscribe: &server.SubjectPermission{Allow: []string{wire.RoleTasks(role), wire.AgentTasks(id), wire.Inbox(id) + ".>"}},
		Response:  &server.ResponsePermission{MaxMsgs: 1},
	}
}

// startBus starts a server on 127.0.0.1:port (-1: any) that knows users.
func startBus(t *testing.T, port int, users ...*server.NkeyUser) *server.Server {
	t.Helper()
	return startBusOpts(t, &server.Options{Host: "127.0.0.1", Port: port, Nkeys: users, NoLog: true, NoSigs: true})
}

func startBusOpts(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready in 5s")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func busURL(s *server.Server) string { return "nats://" + s.Addr().String() }

func busPort(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// connectTester connects the all-permitted user.
func connectTester(t *testing.T, s *server.Server, u testUser) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(busURL(s), nats.Nkey(u.pub, u.kp.Sign))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testAgent is agent 7, a worker, connected to s, its log in logs.
func testAgent(t *testing.T, s *server.Server, u testUser) (*Agent, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	env := Env{ID: 7, Role: "worker", NATSURL: busURL(s), NKeyFile: u.seedFile}
	a, err := Connect(context.Background(), env, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, logs
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// next decodes the next message of sub into v.
func next(t *testing.T, sub *nats.Subscription, v any) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("waiting on %s: %v", sub.Subject, err)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("%s: %q: %v", m.Subject, m.Data, err)
	}
	return m
}

func logHas(logs *syncbuf.Buffer, want string) error {
	if !strings.Contains(logs.String(), want) {
		return fmt.Errorf("log lacks %s:\n%s", want, logs.String())
	}
	return nil
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
