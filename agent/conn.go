package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockrun/flock/wire"
	"github.com/nats-io/nats.go"
)

// Agent is an agent's connection to the bus.
type Agent struct {
	env    Env
	log    *slog.Logger
	nc     *nats.Conn
	start  time.Time
	closed chan struct{} // closed by nats.go's ClosedHandler

	done, failed atomic.Uint64 // tasks, for the heartbeat
	taskMu       sync.Mutex    // one task at a time, whichever subject it came on

	errMu   sync.Mutex
	lastErr string // the last connection error logged, to log each once per outage

	backMu sync.Mutex
	back   chan struct{} // closed (and replaced) on each reconnect
}

// Reconnect backoff: an agent may start before the bus and outlive its
// restarts, so it never gives up, retrying quickly at first and then
// every few seconds; jitter keeps a hundred agents from arriving at once.
const (
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 5 * time.Second
	reconnectBuf = 8 << 20 // publishes kept while the bus is away
)

func reconnectDelay(attempt int) time.Duration {
	d := reconnectMax
	if attempt < 6 { // 250ms << 5 > 5s
		d = min(reconnectMin<<max(attempt-1, 0), reconnectMax)
	}
	return d - rand.N(d/5+1) // within the last fifth below d
}

// Connect connects to the bus as agent env.ID with the nkey seed in
// env.NKeyFile. It returns without waiting for the bus: until it is up,
// and during any outage, publishes are buffered (up to 8 MiB) and sent
// on (re)connect; each reconnect is followed by a fresh heartbeat. ctx
// bounds only the setup; the connection lives until Close.
func Connect(ctx context.Context, env Env, log *slog.Logger) (*Agent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nkey, err := nkeyOption(env.NKeyFile, log)
	if err != nil {
		return nil, err
	}
	a := &Agent{env: env, log: log, start: time.Now(), closed: make(chan struct{}), back: make(chan struct{})}
	nc, err := nats.Connect(env.NATSURL,
		nats.Name("flock-"+strconv.Itoa(env.ID)),
		nkey,
		nats.CustomInboxPrefix(wire.Inbox(env.ID)),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ReconnectBufSize(reconnectBuf),
		// An authorization error while the bus is being reconfigured
		// (the agent's user not added yet) must not end the agent's
		// retries; nats.go gives up on the second by default.
		nats.IgnoreAuthErrorAbort(),
		nats.ConnectHandler(a.connected),
		nats.ReconnectHandler(a.reconnected),
		nats.DisconnectErrHandler(a.disconnected),
		nats.ReconnectErrHandler(a.reconnectFailed),
		nats.ErrorHandler(a.asyncError),
		nats.ClosedHandler(func(*nats.Conn) { close(a.closed) }),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to the bus at %s: %w", env.NATSURL, err)
	}
	a.nc = nc
	return a, nil
}

// nkeyOption reads the agent's seed, saying plainly when it is missing:
// flock's unit binds it where NATS_NKEY says.
func nkeyOption(path string, log *slog.Logger) (nats.Option, error) {
	if path == "" {
		return nil, errors.New("no NATS credential: neither NATS_NKEY nor CREDENTIALS_DIRECTORY is set")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("no NATS credential at %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("NATS credential is readable by others", "path", path, "mode", fi.Mode().Perm().String())
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("NATS credential at %s: %w", path, err)
	}
	return opt, nil
}

// Conn is the underlying connection, for what the Agent does not wrap.
func (a *Agent) Conn() *nats.Conn { return a.nc }

// Close drains the connection (subscriptions finish what they hold,
// buffered publishes go out) and closes it. If the bus is away, what was
// buffered for it is lost, and Close says so.
func (a *Agent) Close() error {
	err := a.nc.Drain()
	<-a.closed // nats.go's DrainTimeout (30s) bounds a drain
	switch {
	case err == nil, errors.Is(err, nats.ErrConnectionClosed):
		return nil
	case errors.Is(err, nats.ErrConnectionReconnecting):
		return fmt.Errorf("the bus is unreachable, messages buffered for it are dropped: %w", err)
	}
	return fmt.Errorf("draining the bus connection: %w", err)
}

func (a *Agent) connected(nc *nats.Conn) {
	a.forgetErr()
	a.log.Info("bus connected", "url", nc.ConnectedUrlRedacted())
}

func (a *Agent) reconnected(nc *nats.Conn) {
	a.forgetErr()
	a.log.Info("bus reconnected", "url", nc.ConnectedUrlRedacted())
	a.backMu.Lock()
	close(a.back)
	a.back = make(chan struct{})
	a.backMu.Unlock()
	// The bus may have restarted and forgotten us: say so at once
	// rather than at the next tick.
	if err := a.heartbeat(); err != nil {
		a.log.Warn("heartbeat after reconnect", "error", err.Error())
	}
}

// reconnect is closed when the connection is back after an outage: what
// was asked of the bus before (a pull for tasks) may be forgotten by it.
func (a *Agent) reconnect() <-chan struct{} {
	a.backMu.Lock()
	defer a.backMu.Unlock()
	return a.back
}

func (a *Agent) disconnected(_ *nats.Conn, err error) {
	if err == nil {
		a.log.Warn("bus disconnected")
		return
	}
	a.log.Warn("bus disconnected", "error", err.Error())
}

// reconnectFailed logs each distinct error once per outage: an agent
// retrying every 5s for an hour should not write 720 lines.
func (a *Agent) reconnectFailed(_ *nats.Conn, err error) {
	if a.firstTime(err) {
		a.log.Warn("bus unreachable, retrying", "error", err.Error())
	}
}

func (a *Agent) firstTime(err error) bool {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	seen := a.lastErr == err.Error()
	a.lastErr = err.Error()
	return !seen
}

func (a *Agent) forgetErr() {
	a.errMu.Lock()
	a.lastErr = ""
	a.errMu.Unlock()
}

func (a *Agent) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	// The bus refusing our key repeats on every retry until it is
	// reconfigured; once per outage says it.
	if errors.Is(err, nats.ErrAuthorization) {
		if a.firstTime(err) {
			a.log.Error("bus refused the agent's credential, retrying", "error", err.Error(), "nkey_file", a.env.NKeyFile)
		}
		return
	}
	attrs := []any{"error", err.Error(), "permission_violation", errors.Is(err, nats.ErrPermissionViolation)}
	if sub != nil {
		attrs = append(attrs, "subject", sub.Subject)
	}
	a.log.Error("bus error", attrs...)
}
