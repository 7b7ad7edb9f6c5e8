package probe

// The bus from inside an agent: what its own credential allows, and what
// the server must refuse.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats.go"
)

// natsConn connects as the agent the unit says this is (NATS_URL,
// NATS_NKEY, NATS_INBOX_PREFIX), or with the seed at seedPath; with anon
// it offers no credential at all. Permission errors the server sends
// later arrive on the returned channel.
func natsConn(ctx context.Context, url, seedPath string, anon bool) (*nats.Conn, <-chan error, error) {
	errs := make(chan error, 8)
	opts := []nats.Option{
		nats.Name("probe"), nats.Timeout(left(ctx)), nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}),
	}
	if prefix := os.Getenv("NATS_INBOX_PREFIX"); prefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(prefix))
	}
	if !anon {
		if seedPath == "" {
			seedPath = os.Getenv("NATS_NKEY")
		}
		opt, err := nats.NkeyOptionFromSeed(seedPath)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, opt)
	}
	if url == "" {
		url = os.Getenv("NATS_URL")
	}
	nc, err := nats.Connect(url, opts...)
	return nc, errs, err
}

// refused waits for the server's verdict on what was just sent: a flush
// round trip, then any permission error it reported before the PONG.
func refused(ctx context.Context, nc *nats.Conn, errs <-chan error) error {
	if err := nc.FlushTimeout(left(ctx)); err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	case <-time.After(200 * time.Millisecond):
		return nc.LastError()
	}
}

// left is what remains of ctx's bound for one step of an operation.
func left(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return Timeout
	}
	return max(time.Until(dl), time.Millisecond)
}

func busOp(ctx context.Context, r Request) (string, error) {
	switch r.Op {
	case "nats-connect", "nats-anon":
		nc, _, err := natsConn(ctx, r.Addr, r.Path, r.Op == "nats-anon")
		if err != nil {
			return "", err
		}
		defer nc.Close()
		return "connected to " + nc.ConnectedServerName() + " as " + nc.ConnectedUrlRedacted(), nil
	case "nats-pub", "nats-sub":
		nc, errs, err := natsConn(ctx, r.Addr, r.Path, false)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		if r.Op == "nats-pub" {
			err = nc.Publish(r.Name, []byte(message))
		} else {
			_, err = nc.SubscribeSync(r.Name)
		}
		if err != nil {
			return "", err
		}
		if err := refused(ctx, nc, errs); err != nil {
			return "", err
		}
		return r.Op + " " + r.Name + " accepted", nil
	case "nats-flood":
		// Count copies of Data on Name, as fast as the connection takes
		// them: whatever the server refuses or the bus cannot read, it
		// must neither log each one nor let them push out another
		// agent's lines.
		nc, _, err := natsConn(ctx, r.Addr, r.Path, false)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		data := []byte(r.Data)
		if r.Size > 0 {
			data = make([]byte, r.Size)
		}
		for range r.Count {
			if err := nc.Publish(r.Name, data); err != nil {
				return "", err
			}
		}
		if err := nc.FlushTimeout(left(ctx)); err != nil {
			return "", err
		}
		return fmt.Sprintf("published %d messages on %s", r.Count, r.Name), nil
	case "nats-request":
		nc, _, err := natsConn(ctx, r.Addr, r.Path, false)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		msg, err := nc.RequestWithContext(ctx, r.Name, []byte(r.Data))
		if err != nil {
			return "", err
		}
		return string(msg.Data), nil
	case "desk":
		// A request to the bus's task desk on Name with Data as the lease
		// and a result as body: what a worker hands in.
		nc, _, err := natsConn(ctx, r.Addr, r.Path, false)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		m := nats.NewMsg(r.Name)
		m.Header.Set(wire.LeaseHeader, r.Data)
		m.Data = []byte(`{"task_id":"t-guessed","agent":2,"ok":true,"output":"forged"}`)
		ans, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return "", err
		}
		if why := ans.Header.Get(wire.ErrorHeader); why != "" {
			return "", fmt.Errorf("refused (%s): %s", ans.Header.Get(wire.RefusalHeader), why)
		}
		return "stored", nil
	case "exec":
		if len(r.Argv) == 0 {
			return "", errors.New("exec: no argv")
		}
		out, err := exec.CommandContext(ctx, r.Argv[0], r.Argv[1:]...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%w: %s", err, clip(string(out)))
		}
		return clip(string(out)), nil
	}
	return "", fmt.Errorf("unknown op %q", r.Op)
}
