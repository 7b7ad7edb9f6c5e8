package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// An agent connects with its seed, names itself, uses its own inbox
// prefix, and its heartbeats and events arrive; what the bus forbids is
// logged as a permission violation. Tier: unit (no root).
func TestConnectHeartbeatsAndEvents(t *testing.T) {
	au, tu := newUser(t), newUser(t)
	s := startBus(t, -1, &server.NkeyUser{Nkey: au.pub, Permissions: agentPerms(7, "worker")}, &server.NkeyUser{Nkey: tu.pub})
	tester := connectTester(t, s, tu)
	beats, _ := tester.SubscribeSync(wire.Heartbeat(7))
	events, _ := tester.SubscribeSync(wire.Events(7))
	_ = tester.Flush()

	a, logs := testAgent(t, s, au)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Heartbeats(ctx, 100*time.Millisecond)
	for i := range 2 {
		var hb wire.HeartbeatMsg
		next(t, beats, &hb)
		if hb.Agent != 7 || time.Since(hb.Time) > time.Minute || hb.UptimeS < 0 || hb.UptimeS > 60 || hb.RSSBytes < 1<<20 {
			t.Errorf("heartbeat %d: %+v", i, hb)
		}
	}
	if err := a.Event("started", map[string]any{"pid": 42}); err != nil {
		t.Fatal(err)
	}
	var ev wire.Event
	next(t, events, &ev)
	if ev.Agent != 7 || ev.Kind != "started" || ev.Data["pid"] != float64(42) || time.Since(ev.Time) > time.Minute {
		t.Errorf("event %+v", ev)
	}

	if name := a.Conn().Opts.Name; name != "flock-7" {
		t.Errorf("connection name %q", name)
	}
	if inbox := a.Conn().NewRespInbox(); !strings.HasPrefix(inbox, wire.Inbox(7)+".") {
		t.Errorf("inbox %q is not below %s", inbox, wire.Inbox(7))
	}
	_ = a.Conn().Publish("flock.bus.reload", nil)
	eventually(t, 5*time.Second, func() error { return logHas(logs, `"permission_violation":true`) })
	eventually(t, 5*time.Second, func() error { return logHas(logs, `"msg":"bus connected"`) })
}

// A missing or unusable seed is an error that says where it looked.
// Tier: unit (no root).
func TestConnectCredentialErrors(t *testing.T) {
	notSeed := filepath.Join(t.TempDir(), "nats")
	if err := writeFile(notSeed, "not a seed"); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "absent")
	for _, tc := range []struct {
		file    string
		want    string
		missing bool
	}{
		{missing, "no NATS credential at " + missing, true},
		{"", "no NATS credential: neither NATS_NKEY nor CREDENTIALS_DIRECTORY is set", false},
		{notSeed, "NATS credential at " + notSeed, false},
	} {
		_, err := Connect(context.Background(), Env{ID: 7, NATSURL: "nats://127.0.0.1:1", NKeyFile: tc.file}, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, fs.ErrNotExist) != tc.missing {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
}

// Reconnect waits start near 250ms, double, and stay at most 5s.
// Tier: unit (no root).
func TestReconnectDelay(t *testing.T) {
	for _, tc := range []struct {
		attempt  int
		low, top time.Duration
	}{
		{1, 200 * time.Millisecond, 250 * time.Millisecond},
		{2, 400 * time.Millisecond, 500 * time.Millisecond},
		{5, 3200 * time.Millisecond, 4 * time.Second},
		{6, 4 * time.Second, 5 * time.Second},
		{1 << 20, 4 * time.Second, 5 * time.Second},
	} {
		for range 100 {
			if d := reconnectDelay(tc.attempt); d < tc.low || d > tc.top {
				t.Fatalf("attempt %d: %s, want %s..%s", tc.attempt, d, tc.low, tc.top)
			}
		}
	}
}
