package bus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// A side of a split cluster that cannot keep a task says so. JetStream
// stores a task only once a majority of the TASKS stream's copies have it;
// on a side without that majority a publish is answered "no responders"
// (no leader of TASKS is reachable: clients print "no response from
// stream"), or not at all (the leader there waits for copies it cannot
// reach until it steps down, up to 20 s). So the bus answers a task
// published here itself, with a JetStream error whose description names
// the cause (wire.NoQuorumReply; nats.go, the nats CLI and the other
// clients show it as it is), when nobody else could store it now: this
// server's copy of TASKS leads without having heard from a majority of
// the copies lately, or follows a leader it has not heard from (the route
// to it, which carries its interest in the subjects, is dead: what goes
// over it is lost, or delivered once the network heals), or no subscriber
// but the bus takes the subject (no leader reachable, here or over a
// route). Never when a leader could still answer: a refusal for a task
// that was stored would be worse than a timeout. The first two say the
// task may not be stored (this copy took it, or a late delivery may
// store it), the last that it was not. Nothing is stored by the refusal; a sender that tries again
// with the same id (Nats-Msg-Id) once the hosts are back is stored once.
//
// Watching costs a look at this server's copy every half second; the
// bus takes the subjects (and so sees every task published here) only
// while that copy is in doubt: no leader, a leader not heard from, or
// this server leading without a majority.

// quorumEvery is how often the bus looks; peerSilence is how long a copy
// may go unheard before it counts as out of reach: four of raft's 1 s
// heartbeats.
const (
	quorumEvery = 500 * time.Millisecond
	peerSilence = 4 * time.Second
)

// copyView is what this server's copy of TASKS says of the stream.
type copyView struct {
	doubt bool // no leader, a leader not heard from, or leading without a majority
	// alone: this server leads and has not heard from a majority: it
	// cannot store, though its own subscription takes the subject.
	alone bool
	// silent: the leader is another server not heard from lately: the
	// route to it, which carries its interest in the subjects, is dead
	// or dying, and what goes over it is lost, or delivered late.
	silent bool
	why    string // for the sender, when refused
}

// maybe says whether a task refused now may yet be stored: this copy
// took it (leading alone), or it went over a route to a leader that may
// deliver it once the network heals.
func (v copyView) maybe() bool { return v.alone || v.silent }

// tasksCopy reads this server's copy of TASKS. A server that has no copy
// of it (yet) has no doubt: it is not the one to refuse.
func (s *Server) tasksCopy() copyView {
	jsz, err := s.ns.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil || jsz == nil {
		return copyView{}
	}
	for _, a := range jsz.AccountDetails {
		for _, sd := range a.Streams {
			if sd.Name == wire.TasksStream && sd.Cluster != nil {
				return viewOf(s.cfg.server(), s.hostsInCluster(), sd.Cluster)
			}
		}
	}
	return copyView{}
}

// viewOf reads ci, the cluster information of self's copy of TASKS.
func viewOf(self string, hosts int, ci *server.ClusterInfo) copyView {
	copies := len(ci.Replicas) + 1
	if ci.Leader == "" {
		// Without a leader self is among the replicas listed.
		copies = max(len(ci.Replicas), 1)
	}
	majority := copies/2 + 1
	heard := []string{self}
	var silent []string
	for _, r := range ci.Replicas {
		switch {
		case r.Name == self:
		case !r.Offline && r.Active > 0 && r.Active < peerSilence:
			heard = append(heard, r.Name)
		default:
			silent = append(silent, r.Name)
		}
	}
	slices.Sort(heard)
	slices.Sort(silent)
	why := func(what string) string {
		return fmt.Sprintf("host %s cannot store tasks now: %s (in the last %s it heard from %s, not from %s). "+
			"A task is stored once a majority (%d) of the %d copies of %s have it, and the flock has %d hosts. "+
			"Send it again once the hosts reach each other (the same id is stored once), or on a host that reaches the others",
			self, what, peerSilence, strings.Join(heard, ", "), orNone(silent), majority, copies, wire.TasksStream, hosts)
	}
	noLeader := why("no leader of " + wire.TasksStream + " is reachable from it")
	switch {
	case ci.Leader == "":
		return copyView{doubt: true, why: noLeader}
	case ci.Leader == self:
		if len(heard) < majority {
			return copyView{doubt: true, alone: true, why: why("it leads " + wire.TasksStream + " without a majority of its copies")}
		}
	default:
		for _, r := range ci.Replicas {
			if r.Name == ci.Leader && !r.Offline && r.Active >= peerSilence {
				return copyView{doubt: true, silent: true, why: noLeader}
			}
		}
	}
	return copyView{}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// hostsInCluster is how many hosts the flock has: this one and those it
// routes to.
func (s *Server) hostsInCluster() int {
	if s.cluster == nil {
		return 1
	}
	return len(s.cluster.routes) + 1
}

// refusing says whether a task published here on subject is refused
// now: this server leads alone, the leader is not heard from, or no one
// but the bus takes the subject (taken: whether the bus does).
func (s *Server) refusing(v copyView, subject string, taken bool) bool {
	if v.maybe() {
		return true
	}
	if !v.doubt {
		return false
	}
	n := s.ns.GlobalAccount().Interest(subject)
	if taken {
		n--
	}
	return n <= 0
}

// watchQuorum refuses the tasks published here that nobody could store
// (refusing), logging each change, until stop is closed.
func (s *Server) watchQuorum(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var sub *nats.Subscription
	probe := wire.RoleTasks(string(spec.RoleWorker)) // a subject TASKS takes
	t := time.NewTicker(quorumEvery)
	defer t.Stop()
	was := false
	for {
		v := s.tasksCopy()
		s.mu.Lock()
		s.view = v
		s.mu.Unlock()
		switch {
		case v.doubt && sub == nil:
			var err error
			sub, err = s.nc.Subscribe(wire.TasksAll, func(m *nats.Msg) {
				s.mu.Lock()
				v := s.view
				s.mu.Unlock()
				if m.Reply != "" && s.refusing(v, m.Subject, true) {
					_ = m.Respond(wire.NoQuorumReply(v.why, v.maybe()))
				}
			})
			if err != nil {
				s.log.Errorf("taking the task subjects to refuse what this side cannot store: %v", err)
				sub = nil
			}
		case !v.doubt && sub != nil:
			_ = sub.Unsubscribe()
			sub = nil
		}
		now := s.refusing(v, probe, sub != nil)
		s.mu.Lock()
		s.noQuorum = ""
		if now {
			s.noQuorum = v.why
		}
		s.mu.Unlock()
		if now != was {
			if now {
				s.log.Warnf("%s (tasks published here are refused, saying so, until it can)", v.why)
			} else {
				s.log.Noticef("tasks published on this host are stored again: a leader of %s with a majority is reachable", wire.TasksStream)
			}
			was = now
		}
		select {
		case <-stop:
			if sub != nil {
				_ = sub.Unsubscribe()
			}
			return
		case <-t.C:
		}
	}
}

// quorumWhy is why tasks are refused now ("" while they are not).
func (s *Server) quorumWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noQuorum
}
