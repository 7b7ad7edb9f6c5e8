package proxyd

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/wire"
)

// DefaultStateDir is where the gateway keeps its counts when systemd
// does not say ($STATE_DIRECTORY, the unit's StateDirectory=).
const DefaultStateDir = "/var/lib/flock-proxy"

// modelGateway is the model gateway flock-proxy serves beside its
// tunnels: its counts on disk, its HTTP server on the connections the
// proxy hands it, its reports on the bus, which carry the proxy's counts
// of the agents' secrets too.
type modelGateway struct {
	gw       *gateway.Gateway
	store    *gateway.Store
	listener *gateway.Listener
	server   *http.Server
	nc       *nats.Conn  // nil: no bus
	resend   atomic.Bool // the bus (re)connected: publish every agent's counts
	stop     chan struct{}

	// secretCounts are the proxy's counts of the agents' secrets; nil
	// until the proxy serves (start).
	secretCounts func() []proxy.SecretCount
	// withSecrets are the ids of the agents granted a secret, reported
	// like those granted a model API.
	withSecrets atomic.Pointer[[]int]
	// sentSecrets are the secrets' counts of each agent last published:
	// the loop's alone.
	sentSecrets map[int]map[string]wire.SecretUse
}

// startGateway opens the counts in o.StateDir and serves cfg's grants,
// with the keys in cr, on the connections the proxy at addr hands over.
func startGateway(cfg proxy.Config, cr credentials, addr net.Addr, o Options, j *proxy.Journal) (*modelGateway, error) {
	stateDir := o.StateDir
	if stateDir == "" {
		stateDir = os.Getenv("STATE_DIRECTORY")
	}
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	store, err := gateway.OpenStore(stateDir)
	if err != nil {
		return nil, err
	}
	m := &modelGateway{store: store, stop: make(chan struct{}), sentSecrets: map[int]map[string]wire.SecretUse{}}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "[WRN] "+format+"\n", args...) }
	limits := events.Journal{Fallback: os.Stderr}
	m.gw = &gateway.Gateway{UIDs: o.UIDs, Store: store, Logf: logf,
		// A refusal is one decision of the proxy's: in the journal (at
		// most a burst a minute per agent) and on the bus.
		Refused: func(agent int, provider, reason string, status int, line string) {
			j.Record(proxy.Record{Agent: agent, Name: provider, Provider: provider, Status: status, Reason: reason, Detail: line})
		},
		// A limit crossed is one event, whatever the requests after it.
		Crossed: func(r gateway.Refusal) {
			extra := map[string]string{"PROVIDER": r.Provider, "LIMIT": r.Limit, "USED": strconv.FormatUint(r.Used, 10), "MAX": strconv.FormatUint(r.Max, 10)}
			if r.Money() { // in dollars
				extra["USED"], extra["MAX"] = wire.PicoUSD(r.Used).Decimal(), wire.PicoUSD(r.Max).Decimal()
			}
			if r.Budget != "" {
				extra["BUDGET"] = r.Budget
			}
			if r.Task != "" {
				extra["TASK"] = r.Task
			}
			if !r.Reset.IsZero() {
				extra["RESET"] = r.Reset.UTC().Format(time.RFC3339)
			}
			if err := limits.Write(r.Line(), events.LevelWarning, events.Record{Kind: events.LimitReached, Agent: r.Agent, Detail: r.Line(), Extra: extra}); err != nil {
				logf("recording a limit reached: %v", err)
			}
		}}
	if err := m.setPolicy(cfg, cr); err != nil {
		store.Close()
		return nil, err
	}
	m.listener = gateway.NewListener(addr)
	m.server = m.gw.Server()
	go m.server.Serve(m.listener)
	return m, nil
}

// start writes, snapshots and publishes the counts from now on, those of
// the secrets as counts says.
func (m *modelGateway) start(counts func() []proxy.SecretCount) {
	m.secretCounts = counts
	go m.loop()
}

// setPolicy loads the keys of cfg's providers from cr (the unit's
// credentials, a key handed over since standing in for systemd's) and
// makes its grants the gateway's policy, and notes which agents it
// grants a secret. A provider whose key or CA changed gets a new
// upstream; requests under way finish on the old one.
func (m *modelGateway) setPolicy(cfg proxy.Config, cr credentials) error {
	secrets, err := gateway.LoadSecrets(cr.read, cfg.Gateway)
	if err != nil {
		return err
	}
	if err := m.gw.SetPolicy(cfg.Gateway, secrets); err != nil {
		return err
	}
	var ids []int
	for uid := range cfg.Placeholders {
		if id := cfg.Policy.Agents[uid].ID; id > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	m.withSecrets.Store(&ids)
	return nil
}

// publishTo makes the gateway report every agent's counts on the bus:
// all of them now and whenever the connection comes back, then each
// agent's as they change.
func (m *modelGateway) publishTo(nc *nats.Conn) {
	m.nc = nc
	m.resend.Store(true)
	nc.SetReconnectHandler(func(*nats.Conn) { m.resend.Store(true) })
}

// loop writes the counts through to the disk every second, snapshots
// them every minute, and publishes what changed.
func (m *modelGateway) loop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		if err := m.store.Sync(); err != nil {
			fmt.Fprintf(os.Stderr, "[ERR] %v\n", err)
		}
		if n%60 == 0 {
			if err := m.store.Snapshot(); err != nil {
				fmt.Fprintf(os.Stderr, "[ERR] %v\n", err)
			}
		}
		m.publish()
	}
}

// publish sends the report of each agent whose counts changed since
// its last (on disk, or of its secrets), or of every agent counted or
// granted anything after the bus (re)connected.
func (m *modelGateway) publish() {
	if m.nc == nil || !m.nc.IsConnected() {
		return
	}
	secrets := m.secretUses()
	ids := m.store.Changed()
	if m.resend.Swap(false) {
		ids = union(m.store.Agents(), m.gw.Granted(), *m.withSecrets.Load(), slices.Sorted(maps.Keys(secrets)))
	}
	var moved []int
	for id, s := range secrets {
		if !maps.EqualFunc(s, m.sentSecrets[id], secretUseEqual) {
			moved = append(moved, id)
		}
	}
	slices.Sort(moved)
	ids = union(ids, moved)
	for _, r := range m.gw.Reports(ids) {
		r.Secrets = secrets[r.Agent]
		b, err := wire.EncodeModelReport(r)
		if err == nil {
			err = m.nc.Publish(wire.UsageSubject(r.Agent), b)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "[WRN] publishing agent %d's model counts: %v\n", r.Agent, err)
			continue
		}
		m.sentSecrets[r.Agent] = r.Secrets
	}
}

// secretUses are the proxy's counts of the agents' secrets, by agent
// then secret.
func (m *modelGateway) secretUses() map[int]map[string]wire.SecretUse {
	out := map[int]map[string]wire.SecretUse{}
	if m.secretCounts == nil {
		return out
	}
	for _, c := range m.secretCounts() {
		if out[c.Agent] == nil {
			out[c.Agent] = map[string]wire.SecretUse{}
		}
		use := wire.SecretUse{Requests: c.Swaps}
		if len(c.Refused) > 0 {
			use.Refused = c.Refused
		}
		out[c.Agent][c.Secret] = use
	}
	return out
}

func secretUseEqual(a, b wire.SecretUse) bool {
	return a.Requests == b.Requests && maps.Equal(a.Refused, b.Refused)
}

func union(lists ...[]int) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range lists {
		for _, id := range l {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// close stops the gateway, letting answers under way finish for a few
// seconds, and keeps the counts.
func (m *modelGateway) close() error {
	m.listener.Close()
	gateway.Shutdown(m.server, 5*time.Second)
	if !m.gw.Drain(2 * time.Second) {
		fmt.Fprintln(os.Stderr, "[WRN] gateway: requests still under way at the stop count at what they reserved")
	}
	close(m.stop)
	return m.store.Close()
}
