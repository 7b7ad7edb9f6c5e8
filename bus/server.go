package bus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// MaxPayload is the largest message the bus carries (spec.MaxMessage).
const MaxPayload = spec.MaxMessage

// maxConnections is nats-server's own bound on all connections, the
// backstop under the agents' shares: the file limit less what JetStream's
// files and the listeners need (spec.BusOwnFiles holds those and the
// operator's and the proxy's connections).
const maxConnections = spec.BusFiles - 1024

// ErrRestartNeeded is Reload's answer to a moved listener: a running
// server cannot rebind, serve must restart.
var ErrRestartNeeded = errors.New("the bus must restart to change its listen, monitor or metrics address, its store_max, its sync, max_subscriptions or max_pending, or its cluster")

// readyTimeout bounds how long Start waits for the listener.
const readyTimeout = 10 * time.Second

// Options are how serve runs the bus, apart from its Config.
type Options struct {
	Log      io.Writer    // log lines go here (the journal via stderr); nil = io.Discard
	Debug    bool         // log connections and protocol errors too
	OnReload func() error // called when the operator requests wire.ReloadSubject; its error text is the reply
	// StoreDir holds the tasks, results and dead letters (JetStream's
	// files, under jetstream/): flock.service's StateDirectory.
	StoreDir string
	// Violation, if set, is told of each request of an agent the task
	// desk refused as a violation; else they are counted and logged here.
	Violation Violation
	// Events, if set, gets the lines that are events (violations and
	// their held-back counts, dead letters) as structured records,
	// instead of Log (serve: the journal).
	Events events.Writer
	Units  Units // where the answers to wire.UnitsSubject read this host's units (units.go); nil: none
	// CredentialsDir, if set, holds the cluster's files by base name
	// (systemd's $CREDENTIALS_DIRECTORY); else they are read from the
	// paths in Config.Cluster.
	CredentialsDir string
}

// Server is the embedded NATS server and the bus's own client on it.
type Server struct {
	ns      *server.Server
	log     *logger
	opts    Options
	started time.Time

	// self is the bus's own user: an nkey made at Start and never written
	// anywhere, so nothing outside this process can be it.
	self    nkeys.KeyPair
	selfPub string
	inbox   string // the bus's own reply prefix (selfInbox, per server in a cluster)
	nc      *nats.Conn
	js      jetstream.JetStream // nc's JetStream API: the bus keeps its streams with it
	givenUp jetstream.ConsumeContext
	desk    *desk
	// storeLimit is the server's bound on the store: store_max, or more
	// while streams made for a larger store_max shrink (raiseStoreLimit).
	storeLimit int64

	reloadMu sync.Mutex // one Reload at a time

	// In a cluster: the files read at Start, and the background making
	// of the streams (cluster.go). ready: the streams exist, the desk
	// hands out tasks.
	cluster    *clusterSetup
	ready      atomic.Bool
	ensureKick chan struct{}
	ensureDone chan struct{}
	stopEnsure context.CancelFunc
	// In a cluster: the refusal of tasks this side cannot store
	// (quorum.go): this server's copy of TASKS as last read, and why
	// tasks are refused ("" while they are not), guarded by mu.
	stopQuorum chan struct{}
	quorumDone chan struct{}
	view       copyView
	noQuorum   string

	// ledger counts violations per agent and kind (violations.go);
	// keepLedger writes it until stopLedger is closed.
	ledger     *ledger
	stopLedger chan struct{}
	ledgerDone chan struct{}
	ledgerOnce sync.Once

	tally  *tally       // results and egress decisions per agent, for /metrics
	models modelReports // the model gateway's counts per agent (models.go)
	gate   *gate        // authentication, and each identity's share of connections (gate.go)
	shares *taskShares  // what each agent sent into TASKS (taskshares.go)

	storeProblems []wire.StoreProblem // what the store did not prove at the start (storecheck.go); under mu

	mu    sync.Mutex
	cfg   Config
	beats map[int]heartbeat // last heartbeat by agent id
	rates map[int]rate      // heartbeats per agent in the current flood window
}

// Start starts nats-server in this process and returns once it accepts
// client connections.
func Start(c Config, o Options) (*Server, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	if o.StoreDir == "" {
		return nil, errors.New("starting the bus: no store directory for tasks and results (flock.service's StateDirectory sets $STATE_DIRECTORY)")
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("starting the bus: creating its own nkey: %w", err)
	}
	pub, _ := kp.PublicKey()
	s := &Server{log: newLogger(o.Log), opts: o, self: kp, selfPub: pub, cfg: c, beats: map[int]heartbeat{}, rates: map[int]rate{}, tally: newTally(), shares: newTaskShares(),
		storeLimit: c.Tasks.withDefaults().StoreMax, inbox: wire.OnServer(selfInbox, c.server())}
	if c.Cluster != nil {
		if s.cluster, err = loadCluster(c.Cluster, o.CredentialsDir); err != nil {
			return nil, fmt.Errorf("starting the bus: %w", err)
		}
	}
	s.log.learn(s.users(c))
	s.gate = newGate(func(cid uint64) bool { return s.ns.GetClient(cid) != nil }, s.overConnections)
	s.gate.set(s.gateUsers(c))
	s.log.refused = s.gate.wasRefused
	key, err := loadLeaseKey(o.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	report := o.Violation
	if report == nil {
		report = s.Violation
	}
	s.desk = newDesk(s, key, report)
	if err := loadReleased(releasedPath(o.StoreDir), s.desk.held); err != nil {
		s.log.Errorf("%v", err)
	}
	s.ledger, err = loadLedger(ledgerPath(o.StoreDir), agentsOf(c))
	if err != nil {
		s.log.Errorf("%v", err)
	}
	s.log.count = s.ledger.add
	s.log.rec = o.Events
	s.stopLedger, s.ledgerDone = make(chan struct{}), make(chan struct{})
	so, err := s.serverOptions(c)
	if err != nil {
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	if c.Cluster != nil {
		if err := s.joinWithStore(time.Now()); err != nil {
			return nil, fmt.Errorf("starting the bus: %w", err)
		}
	}
	s.lookAtStore(time.Now())
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	ns.SetLoggerV2(s.log, o.Debug, false, false)
	s.ns = ns
	s.started = time.Now()
	// Start sets up the listeners before it returns; a taken port shows
	// as a fatal log call (see logger.Fatalf), not as an error.
	ns.Start()
	if msg := s.log.fatalError(); msg != "" {
		ns.Shutdown()
		return nil, fmt.Errorf("starting the bus on %s: %s", c.Listen, msg)
	}
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("starting the bus on %s: not accepting connections after %s", c.Listen, readyTimeout)
	}
	s.serverLosses()
	go s.keepLedger(s.stopLedger, s.ledgerDone)
	if err := s.connectSelf(); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	if c.Cluster != nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopEnsure, s.ensureKick, s.ensureDone = cancel, make(chan struct{}, 1), make(chan struct{})
		go s.keepEnsured(ctx)
		s.ensureLater()
		s.stopQuorum, s.quorumDone = make(chan struct{}), make(chan struct{})
		go s.watchQuorum(s.stopQuorum, s.quorumDone)
		return s, nil
	}
	if err := s.startTasks(context.Background(), c); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("starting the bus: %w", err)
	}
	s.putBack(context.Background())
	s.ready.Store(true)
	return s, nil
}

// serverOptions is c as nats-server options. Reload builds them afresh:
// nats-server must not be handed the same Options twice.
func (s *Server) serverOptions(c Config) (*server.Options, error) {
	host, port, err := splitHostPort(c.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	t := c.Tasks.withDefaults()
	o := &server.Options{
		ServerName: "flock",
		Host:       host,
		Port:       port,
		MaxPayload: MaxPayload,
		NoSigs:     true, // serve handles signals
		Debug:      s.opts.Debug,
		// A connection without a known nkey is refused: the gate checks
		// each client's signature of the nonce, as nats-server does with
		// nkeys, and counts its share of connections (gate.go).
		CustomClientAuthentication: s.gate,
		AlwaysEnableNonce:          true,
		// Each connection's subscriptions and what it may leave unread;
		// times an agent's connections, its share of both.
		MaxSubs:    c.maxSubscriptions(),
		MaxPending: c.maxPending(),
		MaxConn:    maxConnections,
		// Tasks and results are kept on disk, bounded: a full store
		// refuses new tasks rather than dropping queued ones.
		JetStream:          true,
		StoreDir:           s.opts.StoreDir,
		JetStreamMaxStore:  s.storeLimit,
		JetStreamMaxMemory: t.MemoryMax,
		// TASKS has a consumer per worker, and nats-server caps a stream
		// at 1000 unless told otherwise: the 1001st worker would stop the
		// bus's reload. The cap guards a server against clients making
		// consumers; here only the bus makes them (agents may not, grants.go),
		// one per worker in the spec, which bounds them (spec.MaxID).
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
	}
	syncOptions(o, t.Sync)
	if s.cluster != nil {
		s.cluster.apply(o, c.Cluster.Server)
	}
	if c.Monitor != "" {
		o.HTTPHost, o.HTTPPort, err = splitHostPort(c.Monitor)
		if err != nil {
			return nil, fmt.Errorf("monitor: %w", err)
		}
	}
	return o, nil
}

// nkeyUsers is every user of c and the bus's own.
func (s *Server) nkeyUsers(c Config) []*server.NkeyUser {
	users := make([]*server.NkeyUser, 0, len(c.Users)+1)
	for _, u := range c.Users {
		users = append(users, &server.NkeyUser{Nkey: u.Nkey, Permissions: permissions(u)})
	}
	return append(users, &server.NkeyUser{Nkey: s.selfPub, Permissions: permissions(selfUser(s.selfPub, s.inbox))})
}

// selfName names the bus's own user in log lines.
const selfName = "bus"

// selfInbox is the bus's own reply prefix, apart from every agent's.
const selfInbox = "_INBOX.flock-bus"

// selfUser hears heartbeats and the requests addressed to the bus, and
// answers those requests. A reload resets every client's pending answers
// (nats-server re-registers each user), and the reply to a reload request
// comes after it: so the bus may also publish to inboxes, where clients
// take answers. It keeps the streams and consumers (the whole JetStream
// API), hears when a task ran out of deliveries, and moves such a task to
// the dead letters with a failed result. As the task desk it hears the
// workers' requests, pulls and acknowledges tasks for them and stores
// their results, and stores the orchestrators' tasks. It puts back the
// tasks and results that proved themselves in a damaged store
// (storecheck.go). It hears the egress proxy's decisions, to count them
// for /metrics, and asks the proxy what a task spent as it stores the
// task's result.
func selfUser(pub, inbox string) User {
	return User{Name: selfName, Nkey: pub,
		Publish: []string{"_INBOX.>", "$JS.API.>", "$JS.ACK." + givenUpStream + ".>", "$JS.ACK." + wire.TasksStream + ".>",
			wire.DeadSubject, wire.ResultSubject, wire.TasksAll, wire.TaskGoneSubject, wire.TaskSpendSubjects},
		Subscribe:   []string{wire.AllHeartbeats, wire.DeskAll, "flock.bus.>", inbox + ".>", wire.EgressSubjects, wire.UsageSubjects, wire.TasksAll, wire.TaskGoneSubject},
		ResponseTTL: time.Minute}
}

// users maps the public keys of c (and the bus's own) to their users.
func (s *Server) users(c Config) map[string]user {
	m := map[string]user{s.selfPub: {name: selfName}}
	for _, u := range c.Users {
		m[u.Nkey] = user{name: u.Name, agent: u.Agent}
	}
	return m
}

// Reload applies c's users, permissions and shares, keeping every
// connection of a user that stays as it was; the connections of a user
// removed, or whose permissions changed, are closed (its client
// reconnects under the new ones). It then makes the streams and consumers
// match c: a new worker's consumer is created, a removed one's deleted.
func (s *Server) Reload(c Config) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("reloading the bus: %w", err)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.mu.Lock()
	old := s.cfg
	s.mu.Unlock()
	if c.NeedsRestart(old) && !sameCluster(c.Cluster, old.Cluster) {
		return fmt.Errorf("reloading the bus (its cluster changed: %s): %w", describeCluster(old.Cluster, c.Cluster), ErrRestartNeeded)
	}
	if c.NeedsRestart(old) {
		return fmt.Errorf("reloading the bus (listen %s -> %s, monitor %q -> %q, metrics %q -> %q, store_max %d -> %d, sync %s -> %s, max_subscriptions %d -> %d, max_pending %d -> %d): %w",
			old.Listen, c.Listen, old.Monitor, c.Monitor, old.Metrics, c.Metrics, old.Tasks.withDefaults().StoreMax, c.Tasks.withDefaults().StoreMax,
			SyncName(old.Tasks.Sync), SyncName(c.Tasks.Sync), old.maxSubscriptions(), c.maxSubscriptions(), old.maxPending(), c.maxPending(), ErrRestartNeeded)
	}
	if c.Equal(old) {
		return nil
	}
	// The users are the gate's, not nats-server's (gate.go): nothing of
	// the server's own options changes at a reload.
	s.log.learn(s.users(c))
	for _, cid := range s.gate.set(s.gateUsers(c)) {
		_ = s.ns.DisconnectClientByID(cid) // gone already is as good
	}
	if c.Cluster != nil {
		// The streams follow in the background, as at Start: a cluster
		// short of a majority must still take new users.
		s.mu.Lock()
		s.cfg = c
		s.mu.Unlock()
		s.ledger.prune(agentsOf(c))
		s.ensureLater()
		return nil
	}
	if err := s.ensureTasks(context.Background(), c); err != nil {
		return fmt.Errorf("reloading the bus: %w", err)
	}
	// In force only now: a reload that failed half-way is tried again
	// whole, and Status does not claim a config the streams lack.
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
	s.ledger.prune(agentsOf(c))
	return nil
}

// ClientURL is where clients reach the bus, e.g. nats://127.0.0.1:4222.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Shutdown closes every connection and stops the server; what is stored
// (tasks, results, violations) stays in StoreDir for the next Start.
// Calling it again does nothing more.
func (s *Server) Shutdown() {
	if s.stopEnsure != nil {
		s.stopEnsure()
		<-s.ensureDone
	}
	if s.stopQuorum != nil {
		close(s.stopQuorum)
		<-s.quorumDone
		s.stopQuorum = nil
	}
	if s.givenUp != nil {
		s.givenUp.Stop()
	}
	if s.nc != nil {
		// The desk's last acknowledgements and answers reach the server
		// before it stops (the desk does not wait for each ack's reply).
		s.desk.stop()
		_ = s.nc.FlushTimeout(2 * time.Second)
		s.nc.Close()
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	// Last, so what the server said while it stopped is counted too.
	s.ledgerOnce.Do(func() {
		close(s.stopLedger)
		<-s.ledgerDone
	})
}
