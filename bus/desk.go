package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// The task desk stands between workers and JetStream: a worker asks it on
// agent.N.task.* (only agent N may publish there, so the subject names the
// asker; nothing in the body is trusted for identity) and it pulls,
// acknowledges and stores results on the worker's behalf. Each task goes
// out with a lease (lease.go) binding it to the agent and the delivery:
// a worker can only speak of the task it was handed, while it is still
// its own. See docs/design.md, "The task desk".

// deskPulls is where the consumers' answers to the desk's pulls come:
// under the bus's own inbox, which in a cluster is its server's, or every
// desk would hear (and hand out) the tasks pulled for the others.
func (d *desk) deskPulls() string { return d.s.inbox + ".desk." }

// maxPullsPerConsumer stays under JetStream's max_waiting (512 by
// default): waiters beyond it are served as pulls are answered.
const maxPullsPerConsumer = 256

// maxAsksPerAgent bounds one agent's asks waiting at once: a worker
// takes one task at a time, and each ask holds a timer and a pull.
const maxAsksPerAgent = 8

// errDuplicateInFlight is JetStream's answer to a message whose
// deduplication id a clustered stream is still storing
// (JSStreamDuplicateMessageConflict).
const errDuplicateInFlight = 10158

// resultTimeout bounds storing one result.
const resultTimeout = 10 * time.Second

// Violation is how the desk reports an agent's refused request.
type Violation func(agent int, kind, detail string)

type desk struct {
	s      *Server
	key    []byte
	report Violation

	mu      sync.Mutex
	waiting []*waiter
	pulls   map[string]map[string]time.Time // by consumer: token -> expiry of a pull not yet answered
	spares  map[string][]*spare             // by consumer: tasks whose asker had gone
	held    map[uint64]*holding             // by stream sequence: its latest delivery
	token   uint64
	pruned  time.Time
	stopped bool // the bus is shutting down
	// sending are the tasks sent through the desk that JetStream has not
	// confirmed yet, by token (send.go); recounted is when the desk last
	// looked at TASKS for tasks removed without it.
	sending   map[string]*sending
	recounted time.Time
}

// waiter is an agent's ask for a task, not answered yet.
type waiter struct {
	agent int
	reply string
	until time.Time
	timer *time.Timer
}

type spare struct {
	m     *nats.Msg
	timer *time.Timer
}

// holding is the latest delivery of a task.
type holding struct {
	agent     int
	ack       string
	delivered uint64
	id        string
	subject   string
	state     holdState
	handed    time.Time        // when this delivery was handed out (or first spoken of, after a restart)
	at        time.Time        // handed out, or last word of it
	budget    *wire.TaskBudget // the task's own (wire.TaskBudgetHeader); nil: none
}

type holdState int

const (
	held holdState = iota
	released
	resulted
)

func newDesk(s *Server, key []byte, report Violation) *desk {
	return &desk{s: s, key: key, report: report,
		pulls: map[string]map[string]time.Time{}, spares: map[string][]*spare{}, held: map[uint64]*holding{}, sending: map[string]*sending{}}
}

// start subscribes the bus's own client to the desk's subjects: one
// subscription per verb, so a result being stored does not hold up asks.
// In a cluster every desk hears every agent's requests; each serves only
// its own host's agents (Server.local).
func (d *desk) start(nc *nats.Conn) error {
	for subj, h := range map[string]nats.MsgHandler{
		"agent.*.task." + wire.DeskNext:                   d.onNext,
		"agent.*.task." + wire.DeskProgress:               d.onLeased,
		"agent.*.task." + wire.DeskResult:                 d.onLeased,
		"agent.*.task." + wire.DeskRelease:                d.onLeased,
		"agent.*.task." + wire.DeskSend:                   d.onSend,
		d.deskPulls() + ">":                               d.onPulled,
		d.deskSent() + ">":                                d.onSent,
		wire.OnServer(wire.HeldSubject, d.s.cfg.server()): d.onHeld,
		wire.LeasesSubjects:                               d.onLeases,
	} {
		if _, err := nc.Subscribe(subj, h); err != nil {
			return fmt.Errorf("subscribing the task desk to %s: %w", subj, err)
		}
	}
	return nil
}

// ownReply reports whether m's answer goes to its agent's own inbox; one
// that would go anywhere else is a violation, never answered.
func (d *desk) ownReply(agent int, m *nats.Msg) bool {
	if strings.HasPrefix(m.Reply, wire.Inbox(agent)+".") {
		return true
	}
	if m.Reply == "" {
		d.report(agent, wire.RefusedMalformed, m.Subject+" without a reply subject")
	} else {
		d.report(agent, wire.RefusedForeign, fmt.Sprintf("%s asked the answer to go to %q", m.Subject, m.Reply))
	}
	return false
}

// refuse answers m with a refusal, reporting it as a violation if it is one.
func (d *desk) refuse(agent int, m *nats.Msg, kind, reason string) {
	switch kind {
	case wire.RefusedForged, wire.RefusedStale, wire.RefusedMalformed, wire.RefusedOverShare:
		d.report(agent, kind, m.Subject+": "+reason)
	}
	d.answer(m.Reply, wire.RefusalMessage(wire.Refusal{Kind: kind, Reason: reason}), nil)
}

func (d *desk) answer(reply string, h map[string][]string, body []byte) {
	if reply == "" {
		return
	}
	if err := d.s.nc.PublishMsg(&nats.Msg{Subject: reply, Header: h, Data: body}); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		d.s.log.Warnf("the task desk answering %s: %v", reply, err)
	}
}

// onNext takes an ask for a task: a spare one is handed at once, else the
// ask waits (with a pull open for it) until a task comes or it expires.
func (d *desk) onNext(m *nats.Msg) {
	agent, _, ok := wire.DeskRequest(m.Subject)
	if !ok || !d.s.local(agent) || !d.ownReply(agent, m) {
		return
	}
	req, err := wire.ParseNextRequest(m.Data)
	if err != nil {
		d.refuse(agent, m, wire.RefusedMalformed, err.Error())
		return
	}
	if req.Withdraw != "" {
		d.withdraw(agent, req.Withdraw)
		d.answer(m.Reply, nil, nil)
		return
	}
	if !d.s.isWorker(agent) {
		d.refuse(agent, m, wire.RefusedNotWorker, fmt.Sprintf("agent %d is not a worker", agent))
		return
	}
	if !d.s.ready.Load() {
		// Not a violation: the agent asks again (agent.ServeTasks).
		d.refuse(agent, m, wire.RefusedUnavailable, errNotReady.Error())
		return
	}
	// An ask read late may have no one listening by now (its request
	// timed out, its agent was killed; asks and pulled tasks come on
	// separate subscriptions, so it can be read after a task that came
	// later, kept as a spare since no one waited): a spare handed to it
	// would be lost until the ack wait. Like onPulled, the desk serves
	// only an asker that still listens.
	if !d.s.ns.GlobalAccount().SubscriptionInterest(m.Reply) {
		return
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	asks := 0
	for _, w := range d.waiting {
		if w.agent == agent {
			asks++
		}
	}
	if asks >= maxAsksPerAgent {
		d.mu.Unlock()
		d.refuse(agent, m, wire.RefusedTooMany, fmt.Sprintf("agent %d has %d asks waiting already", agent, asks))
		return
	}
	for _, c := range consumersOf(agent) {
		if sp := d.takeSpare(c); sp != nil {
			d.handLocked(agent, m.Reply, sp)
			d.mu.Unlock()
			return
		}
	}
	w := &waiter{agent: agent, reply: m.Reply, until: time.Now().Add(req.Wait())}
	d.waiting = append(d.waiting, w)
	w.timer = time.AfterFunc(req.Wait(), func() { d.expire(w) })
	pulls := d.needPullsLocked()
	d.mu.Unlock()
	d.issue(pulls)
}

// consumersOf are the consumers an agent's ask is served from, its own first.
func consumersOf(agent int) []string {
	return []string{wire.AgentConsumer(agent), wire.RoleConsumer(string(spec.RoleWorker))}
}

func (d *desk) wants(w *waiter, consumer string) bool {
	return consumer == wire.RoleConsumer(string(spec.RoleWorker)) || consumer == wire.AgentConsumer(w.agent)
}

// expire answers an ask that waited its time with no task.
func (d *desk) expire(w *waiter) {
	if d.drop(w) {
		d.answer(w.reply, nil, nil)
	}
}

// withdraw answers agent's ask on reply now, with no task.
func (d *desk) withdraw(agent int, reply string) {
	d.mu.Lock()
	var found *waiter
	for _, w := range d.waiting {
		if w.agent == agent && w.reply == reply {
			found = w
			break
		}
	}
	d.mu.Unlock()
	if found != nil {
		found.timer.Stop()
		d.expire(found)
	}
}

// drop removes w from the waiting, reporting whether it was there.
func (d *desk) drop(w *waiter) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range d.waiting {
		if x == w {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// pull is one pull request to make.
type pull struct {
	consumer, reply string
	wait            time.Duration
}

// needPullsLocked opens as many pulls per consumer as asks wait on it.
func (d *desk) needPullsLocked() []pull {
	now := time.Now()
	var out []pull
	want := map[string]int{}
	last := map[string]time.Time{}
	for _, w := range d.waiting {
		for _, c := range consumersOf(w.agent) {
			want[c]++
			last[c] = w.until
		}
	}
	for c, n := range want {
		open := d.pulls[c]
		if open == nil {
			open = map[string]time.Time{}
			d.pulls[c] = open
		}
		for tok, until := range open {
			if now.After(until.Add(time.Second)) { // its expiry was not heard
				delete(open, tok)
			}
		}
		for len(open) < min(n, maxPullsPerConsumer) {
			d.token++
			tok := strconv.FormatUint(d.token, 10)
			wait := max(last[c].Sub(now), 10*time.Millisecond)
			open[tok] = now.Add(wait)
			out = append(out, pull{c, d.deskPulls() + c + "." + tok, wait})
		}
	}
	return out
}

func (d *desk) issue(pulls []pull) {
	for _, p := range pulls {
		body, _ := json.Marshal(map[string]any{"batch": 1, "expires": p.wait.Nanoseconds()})
		subj := "$JS.API.CONSUMER.MSG.NEXT." + wire.TasksStream + "." + p.consumer
		if err := d.s.nc.PublishRequest(subj, p.reply, body); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			d.s.log.Warnf("the task desk pulling from %s: %v", p.consumer, err)
		}
	}
}

// onPulled takes a consumer's answer to a pull: a task for the first ask
// still waiting on it (a spare if none), or a status (the pull expired).
func (d *desk) onPulled(m *nats.Msg) {
	if !strings.HasPrefix(m.Reply, "$JS.ACK.") {
		// A status: 408 the pull expired, 409 it was refused or cut.
		c, tok, _ := strings.Cut(strings.TrimPrefix(m.Subject, d.deskPulls()), ".")
		status := m.Header.Get("Status")
		if status == "100" {
			return
		}
		d.mu.Lock()
		delete(d.pulls[c], tok)
		var pulls []pull
		if status == "408" {
			pulls = d.needPullsLocked()
		}
		d.mu.Unlock()
		d.issue(pulls)
		return
	}
	dl, err := parseAck(m.Reply)
	if err != nil {
		d.s.log.Errorf("the task desk was handed a message it cannot acknowledge (%v): left for redelivery", err)
		return
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		_ = d.s.nc.Publish(m.Reply, []byte("-NAK"))
		return
	}
	d.answeredLocked(dl.consumer)
	var w *waiter
	for len(d.waiting) > 0 && w == nil {
		i := d.firstFor(dl.consumer)
		if i < 0 {
			break
		}
		x := d.waiting[i]
		d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
		x.timer.Stop()
		// An asker that went (killed, its request timed out) no longer
		// listens: the task goes to the next.
		if d.s.ns.GlobalAccount().SubscriptionInterest(x.reply) {
			w = x
		}
	}
	if w != nil {
		d.handLocked(w.agent, w.reply, &spare{m: m})
	} else {
		d.spareLocked(dl.consumer, m)
	}
	pulls := d.needPullsLocked()
	d.mu.Unlock()
	d.issue(pulls)
}

// answeredLocked forgets the pull of consumer that expires first (a task's
// answer does not say which pull it answers; the server serves them in
// order).
func (d *desk) answeredLocked(consumer string) {
	var first string
	var at time.Time
	for tok, until := range d.pulls[consumer] {
		if first == "" || until.Before(at) {
			first, at = tok, until
		}
	}
	delete(d.pulls[consumer], first)
}

func (d *desk) firstFor(consumer string) int {
	for i, w := range d.waiting {
		if d.wants(w, consumer) {
			return i
		}
	}
	return -1
}

// spareLocked keeps a task no one waits for, for the next asker, for a
// third of the ack wait; then it goes back to the queue.
func (d *desk) spareLocked(consumer string, m *nats.Msg) {
	sp := &spare{m: m}
	sp.timer = time.AfterFunc(d.s.ackWait()/3, func() {
		d.mu.Lock()
		l := d.spares[consumer]
		kept := false
		for i, x := range l {
			if x == sp {
				d.spares[consumer] = append(l[:i], l[i+1:]...)
				kept = true
				break
			}
		}
		d.mu.Unlock()
		if kept {
			_ = d.s.nc.Publish(m.Reply, []byte("-NAK"))
		}
	})
	d.spares[consumer] = append(d.spares[consumer], sp)
}

func (d *desk) takeSpare(consumer string) *spare {
	l := d.spares[consumer]
	if len(l) == 0 {
		return nil
	}
	sp := l[0]
	d.spares[consumer] = l[1:]
	if sp.timer != nil {
		sp.timer.Stop()
	}
	return sp
}

// handLocked gives task sp to agent on reply, with its lease, and records
// the delivery as the task's latest.
func (d *desk) handLocked(agent int, reply string, sp *spare) {
	m := sp.m
	dl, err := parseAck(m.Reply)
	if err != nil {
		return
	}
	id := wire.TaskID(m.Header, dl.seq)
	now := time.Now()
	d.held[dl.seq] = &holding{agent: agent, ack: m.Reply, delivered: dl.delivered, id: id, subject: m.Subject, handed: now, at: now,
		budget: d.taskBudget(m.Header, id)}
	h, body := wire.HandedMessage(wire.Handed{ID: id, Subject: m.Subject, Payload: m.Data, Delivery: dl.delivered,
		Lease: makeLease(d.key, agent, m.Reply), AckWait: d.s.ackWait()})
	d.answer(reply, h, body)
}

// onLeased takes progress, a result or a release of a task handed out:
// the lease must be the asking agent's, and its delivery the task's latest.
func (d *desk) onLeased(m *nats.Msg) {
	agent, verb, ok := wire.DeskRequest(m.Subject)
	if !ok || !d.s.local(agent) || (m.Reply != "" || verb != wire.DeskProgress) && !d.ownReply(agent, m) {
		return
	}
	ack, malformed, err := openLease(d.key, agent, m.Header.Get(wire.LeaseHeader))
	if malformed {
		d.refuse(agent, m, wire.RefusedMalformed, "lease: "+err.Error())
		return
	}
	if err != nil {
		d.refuse(agent, m, wire.RefusedForged, err.Error())
		return
	}
	dl, err := parseAck(ack)
	if err != nil {
		d.refuse(agent, m, wire.RefusedMalformed, err.Error())
		return
	}
	h, kind, reason := d.current(agent, ack, dl, verb)
	if kind != "" {
		d.refuse(agent, m, kind, reason)
		return
	}
	switch verb {
	case wire.DeskProgress:
		d.ackWith(ack, "+WPI")
	case wire.DeskRelease:
		// Recorded before the NAK: once the task may go to another, its
		// last holder's lease must already be stale, across a restart too.
		d.mu.Lock()
		h.state, h.at = released, time.Now()
		err := d.saveReleasedLocked()
		d.mu.Unlock()
		if err != nil {
			d.s.log.Errorf("the task desk: %v (a release of task %s would not outlive a restart)", err, h.id)
		}
		d.ackWith(ack, "-NAK")
	case wire.DeskResult:
		if h.state == resulted {
			break // its answer was lost: stored already
		}
		if kind, reason := d.store(agent, dl.seq, h, m.Data); kind != "" {
			d.refuse(agent, m, kind, reason)
			return
		}
		d.ackWith(ack, "+ACK")
		d.mark(dl.seq, h, resulted)
		d.s.taskGone(dl.seq)
	}
	d.answer(m.Reply, nil, nil)
}

// current is the holding the lease speaks of if its delivery is the
// task's latest, else the refusal. One the desk does not know (it
// restarted since) is read back from the stream.
func (d *desk) current(agent int, ack string, dl delivery, verb string) (*holding, string, string) {
	d.mu.Lock()
	d.pruneLocked()
	h := d.held[dl.seq]
	d.mu.Unlock()
	switch {
	case h != nil && h.ack == ack && h.state == released:
		return nil, wire.RefusedStale, fmt.Sprintf("task %s was given back", h.id)
	case h != nil && h.ack == ack && h.state == resulted && verb != wire.DeskResult:
		return nil, wire.RefusedGone, fmt.Sprintf("task %s is done", h.id)
	case h != nil && h.ack == ack:
		return h, "", ""
	case h != nil && h.delivered >= dl.delivered:
		return nil, wire.RefusedStale, fmt.Sprintf("task %s was handed to another worker since (delivery %d, this lease's %d)", h.id, h.delivered, dl.delivered)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resultTimeout)
	defer cancel()
	raw, err := d.s.js.Stream(ctx, wire.TasksStream)
	var task *jetstream.RawStreamMsg
	if err == nil {
		task, err = raw.GetMsg(ctx, dl.seq)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, wire.RefusedGone, "the task is no longer queued (done, or dead-lettered)"
	}
	if err != nil {
		return nil, wire.RefusedUnavailable, "reading the task: " + err.Error()
	}
	now := time.Now()
	id := wire.TaskID(task.Header, dl.seq)
	h = &holding{agent: agent, ack: ack, delivered: dl.delivered, id: id, subject: task.Subject, handed: now, at: now,
		budget: d.taskBudget(task.Header, id)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if x := d.held[dl.seq]; x != nil && x.delivered >= dl.delivered && x.ack != ack {
		return nil, wire.RefusedStale, fmt.Sprintf("task %s was handed to another worker since", x.id)
	}
	d.held[dl.seq] = h
	return h, "", ""
}

func (d *desk) mark(seq uint64, h *holding, st holdState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.state, h.at = st, time.Now()
}

// pruneLocked forgets, once a minute, deliveries no one spoke of for
// long: JetStream has handed those out again since, or they are done.
func (d *desk) pruneLocked() {
	now := time.Now()
	if now.Sub(d.pruned) < time.Minute {
		return
	}
	d.pruned = now
	keep := max(10*d.s.ackWait(), wire.TaskDedupWindow)
	for seq, h := range d.held {
		if now.Sub(h.at) > keep {
			delete(d.held, seq)
		}
	}
}

func (d *desk) ackWith(ack, what string) {
	if err := d.s.nc.Publish(ack, []byte(what)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		d.s.log.Warnf("the task desk acknowledging (%s): %v", what, err)
	}
	d.mu.Lock()
	if h := d.findLocked(ack); h != nil {
		h.at = time.Now()
	}
	d.mu.Unlock()
}

func (d *desk) findLocked(ack string) *holding {
	if dl, err := parseAck(ack); err == nil {
		if h := d.held[dl.seq]; h != nil && h.ack == ack {
			return h
		}
	}
	return nil
}

// store writes agent's result of h, the task at seq: the task's id and
// subject are the queued task's, the agent the asker's, and its spend
// flock-proxy's, whatever the body says.
func (d *desk) store(agent int, seq uint64, h *holding, body []byte) (kind, reason string) {
	var r wire.Result
	if err := json.Unmarshal(body, &r); err != nil {
		return wire.RefusedMalformed, fmt.Sprintf("a result is wire.Result as JSON (%v)", err)
	}
	r.TaskID, r.Agent = h.id, agent
	r.Spend = d.spend(agent, seq, h.id)
	hdr, data, err := wire.ResultMessage(h.id, h.subject, r)
	if err != nil {
		return wire.RefusedMalformed, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), resultTimeout)
	defer cancel()
	_, err = d.s.js.PublishMsg(ctx, &nats.Msg{Subject: wire.ResultSubject, Header: hdr, Data: data})
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		d.s.tally.result(agent, r.OK, r.Spend)
		return "", ""
	case errors.As(err, &apiErr) && apiErr.ErrorCode == errDuplicateInFlight:
		// Another host's desk is storing this task's result this very
		// moment (a redelivery after a host was lost): asked again, the
		// stream answers duplicate, and the one result is that one.
		return wire.RefusedUnavailable, "storing the result: " + err.Error()
	case errors.Is(err, nats.ErrMaxPayload), errors.As(err, &apiErr):
		return wire.RefusedNotStored, err.Error()
	}
	return wire.RefusedUnavailable, "storing the result: " + err.Error()
}

// counts are the tasks each agent holds and the asks it has waiting.
func (d *desk) counts() (holding, waiting map[int]int) {
	holding, waiting = map[int]int{}, map[int]int{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.held {
		if h.state == held {
			holding[h.agent]++
		}
	}
	for _, w := range d.waiting {
		waiting[w.agent]++
	}
	return holding, waiting
}

// heldTasks are the tasks workers hold now, agent's alone if agent is
// not 0, by stream sequence.
func (d *desk) heldTasks(agent int) wire.HeldTasks {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := wire.HeldTasks{Tasks: []wire.Held{}}
	for seq, h := range d.held {
		if h.state == held && (agent == 0 || h.agent == agent) {
			out.Tasks = append(out.Tasks, wire.Held{Seq: seq, ID: h.id, Agent: h.agent, Delivery: h.delivered, DeliveredAt: h.handed, Budget: h.budget})
		}
	}
	slices.SortFunc(out.Tasks, func(a, b wire.Held) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// onHeld answers the operator's wire.HeldSubject request.
func (d *desk) onHeld(m *nats.Msg) { d.answerHeld(m, 0) }

// answerHeld answers m with the tasks held, agent's alone if not 0.
func (d *desk) answerHeld(m *nats.Msg, agent int) {
	data, err := wire.EncodeHeld(d.heldTasks(agent))
	if err != nil {
		d.s.log.Errorf("encoding the tasks held: %v", err)
		return
	}
	d.s.respond(m, data)
}

// stop gives back what the desk holds for no one (its spares, and any
// task a pull still brings) and takes no more asks, before the bus
// closes: a task left in the desk's hands would wait out the ack wait
// after the restart. Waiting asks are left unanswered: their agents
// withdraw them when they reconnect.
func (d *desk) stop() {
	d.mu.Lock()
	d.stopped = true
	var naks []string
	for c, l := range d.spares {
		for _, sp := range l {
			sp.timer.Stop()
			naks = append(naks, sp.m.Reply)
		}
		delete(d.spares, c)
	}
	for _, w := range d.waiting {
		w.timer.Stop()
	}
	d.waiting = nil
	d.mu.Unlock()
	for _, ack := range naks {
		_ = d.s.nc.Publish(ack, []byte("-NAK"))
	}
}
