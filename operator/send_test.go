package operator

import (
	"context"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/wire"
)

// TestSendTaskBudget: a task sent with a budget carries it in
// wire.TaskBudgetHeader as wire.ParseTaskBudget reads it; one sent
// without has no such header.
//
// Tier: unit (a real embedded NATS server with JetStream, no root).
func TestSendTaskBudget(t *testing.T) {
	nc := plainConn(t, serverWith(t, server.Options{JetStream: true, StoreDir: t.TempDir()}))
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.TasksStream, Subjects: []string{wire.TasksAll}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		budget wire.TaskBudget
		header string
	}{
		{"both", wire.TaskBudget{Tokens: 200000, USD: wire.USD / 2}, "tokens=200000,usd=0.5"},
		{"usd", wire.TaskBudget{USD: 3 * wire.USD / 100}, "usd=0.03"},
		{"none", wire.TaskBudget{}, ""},
	} {
		sent, err := SendTaskWithin(ctx, nc, wire.RoleTasks("worker"), tc.id, []byte("x"), tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tasks.GetMsg(ctx, sent.Seq)
		if err != nil {
			t.Fatal(err)
		}
		got := raw.Header.Get(wire.TaskBudgetHeader)
		_, set := raw.Header[wire.TaskBudgetHeader]
		if got != tc.header || set != (tc.header != "") {
			t.Errorf("task %s: %s %q (set %v), want %q", tc.id, wire.TaskBudgetHeader, got, set, tc.header)
		}
		if b, err := wire.ParseTaskBudget(got); err != nil || b != tc.budget {
			t.Errorf("task %s: the header reads as %+v, %v; want %+v", tc.id, b, err, tc.budget)
		}
	}
}
