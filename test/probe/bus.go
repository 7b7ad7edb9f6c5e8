package main

// The bus from inside an agent: what its own credential allows, and what
// the server must refuse.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/nats-io/nats.go"
)

// natsConn connects as the agent the unit says this is (NATS_URL,
// NATS_NKEY, NATS_INBOX_PREFIX), or with the seed at seedPath; with anon
// it offers no credential at all. Permission errors the server sends
// later arrive on the returned channel.
func natsConn(seedPath string, anon bool) (*nats.Conn, <-chan error, error) {
	errs := make(chan error, 8)
	opts := []nats.Option{
		nats.Name("probe"), nats.Timeout(attemptTimeout), nats.MaxReconnects(0),
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
	nc, err := nats.Connect(os.Getenv("NATS_URL"), opts...)
	return nc, errs, err
}

// refused waits for the server's verdict on what was just sent: a flush
// round trip, then any permission error it reported before the PONG.
func refused(nc *nats.Conn, errs <-chan error) error {
	if err := nc.FlushTimeout(attemptTimeout); err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	case <-time.After(200 * time.Millisecond):
		return nc.LastError()
	}
}

func busOp(ctx context.Context, r Request) (string, error) {
	switch r.Op {
	case "nats-connect", "nats-anon":
		nc, _, err := natsConn(r.Path, r.Op == "nats-anon")
		if err != nil {
			return "", err
		}
		defer nc.Close()
		return "connected to " + nc.ConnectedServerName() + " as " + nc.ConnectedUrlRedacted(), nil
	case "nats-pub", "nats-sub":
		nc, errs, err := natsConn("", false)
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
		if err := refused(nc, errs); err != nil {
			return "", err
		}
		return r.Op + " " + r.Name + " accepted", nil
	case "nats-request":
		nc, _, err := natsConn("", false)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		msg, err := nc.RequestWithContext(ctx, r.Name, []byte(r.Data))
		if err != nil {
			return "", err
		}
		return string(msg.Data), nil
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
