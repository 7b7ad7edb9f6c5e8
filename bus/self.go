package bus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/wire"
)

// connectSelf connects the bus's own client in-process (no socket): it
// keeps heartbeats and answers the operator's status and reload requests.
// Only the operator may publish on flock.bus.*, so only it is answered.
func (s *Server) connectSelf() error {
	nc, err := nats.Connect(s.ns.ClientURL(),
		nats.InProcessServer(s.ns),
		nats.Nkey(s.selfPub, s.self.Sign),
		nats.Name("flock-bus"),
		nats.CustomInboxPrefix(s.inbox),
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			s.log.Warnf("the bus's own client: %v", err)
		}),
	)
	if err != nil {
		return fmt.Errorf("connecting the bus's own client: %w", err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("the bus's own JetStream client: %w", err)
	}
	// Heartbeats and egress decisions: every bus hears every host's.
	// The operator's requests: each bus its own host's (wire.OnServer).
	server := s.cfg.server()
	for subj, h := range map[string]nats.MsgHandler{
		wire.AllHeartbeats:                             s.onHeartbeat,
		wire.OnServer(wire.StatusSubject, server):      s.onStatus,
		wire.OnServer(wire.ReloadSubject, server):      s.onReload,
		wire.OnServer(wire.PermissionsSubject, server): s.onPermissions,
		wire.EgressSubjects:                            s.onEgress,
		wire.UsageSubjects:                             s.onUsage,
		wire.TaskGoneSubject:                           s.onTaskGone,
	} {
		if _, err := nc.Subscribe(subj, h); err != nil {
			return fmt.Errorf("subscribing the bus's own client to %s: %w", subj, err)
		}
	}
	if err := s.answerUnits(nc); err != nil {
		return err
	}
	if err := s.desk.start(nc); err != nil {
		return err
	}
	// Subscriptions are in place once the server answered a ping.
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribing the bus's own client: %w", err)
	}
	return nil
}

// heartbeat is an agent's last heartbeat: what its body said, as far as
// it could be read, and when the bus received it.
type heartbeat struct {
	msg wire.HeartbeatMsg
	at  time.Time
}

// A flood is more heartbeats from one agent in floodWindow than
// floodBeats: a heartbeat a second is ten times what any agent needs
// (spec heartbeat is seconds at the least), and the bus reads every one.
// Counted once per window, as one violation of kind flood.
const (
	floodWindow = 10 * time.Second
	floodBeats  = 100
)

// rate is one agent's heartbeats in its current flood window.
type rate struct {
	start   time.Time
	n       int
	flooded bool // counted for this window already
}

// onHeartbeat keeps the last heartbeat of each agent. Any message on
// agent.N.heartbeat is agent N's heartbeat at the time the bus received
// it (the seed contract: a client of any language heartbeats by
// publishing there); its body is read leniently, and one it cannot read
// at all is a malformed message (counted, logged within the agent's
// limit: a flood of them writes a line a minute). The agent is the one in
// the subject, which only it may publish on; the body's claim is not
// trusted. Never answered: the reply subject is the publisher's choice, and
// answering would let it make the bus publish there.
func (s *Server) onHeartbeat(m *nats.Msg) {
	id, ok := heartbeatAgent(m.Subject)
	if !ok {
		return
	}
	hb, err := wire.ParseHeartbeat(m.Data)
	hb.Agent = id
	now := time.Now()
	s.mu.Lock()
	s.beats[id] = heartbeat{msg: hb, at: now}
	r := s.rates[id]
	if now.Sub(r.start) >= floodWindow {
		r = rate{start: now}
	}
	r.n++
	flood := r.n > floodBeats && !r.flooded
	r.flooded = r.flooded || flood
	s.rates[id] = r
	s.mu.Unlock()
	// Every bus hears every agent's heartbeats; only its host's counts
	// what it does wrong (status across hosts adds them up).
	if !s.local(id) {
		return
	}
	if flood {
		s.Violation(id, wire.ViolationFlood, fmt.Sprintf("more than %d heartbeats within %s", floodBeats, floodWindow))
	}
	if err != nil {
		s.Violation(id, wire.ViolationMalformed, fmt.Sprintf("a heartbeat whose body could not be read (%v); it counts as a heartbeat all the same", err))
	}
}

// heartbeatAgent is the id in agent.<id>.heartbeat.
func heartbeatAgent(subject string) (int, bool) {
	rest, ok := strings.CutPrefix(subject, "agent.")
	if !ok {
		return 0, false
	}
	n, ok := strings.CutSuffix(rest, ".heartbeat")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(n)
	return id, err == nil && wire.Heartbeat(id) == subject
}

func (s *Server) onStatus(m *nats.Msg) {
	data, err := json.Marshal(s.Status())
	if err != nil {
		s.log.Errorf("encoding the bus status: %v", err)
		return
	}
	s.respond(m, data)
}

// onReload runs OnReload; the reply is empty on success, else the error text.
func (s *Server) onReload(m *nats.Msg) {
	var reply []byte
	switch {
	case s.opts.OnReload == nil:
		reply = []byte("this bus cannot reload (no reload handler)")
	default:
		if err := s.opts.OnReload(); err != nil {
			s.log.Errorf("reload requested over the bus failed: %v", err)
			reply = []byte(err.Error())
		} else {
			s.log.Noticef("reloaded on the operator's request")
		}
	}
	s.respond(m, reply)
}

func (s *Server) respond(m *nats.Msg, data []byte) {
	if m.Reply == "" {
		return
	}
	if err := m.Respond(data); err != nil {
		s.log.Warnf("answering %s: %v", m.Subject, err)
	}
}

// isWorker reports whether agent takes tasks in the config in force.
func (s *Server) isWorker(agent int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := slices.BinarySearch(s.cfg.Tasks.Workers, agent)
	return ok
}

// ackWait is the config's ack wait.
func (s *Server) ackWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Tasks.withDefaults().AckWait
}
