// Package wire is the language of flock's bus: the subjects agents, the
// bus and flockctl use, and the messages they exchange. It is a leaf
// package (no server, no client) so an agent links nothing it does not use.
package wire

import (
	"strconv"
	"strings"
	"time"
)

// Subjects. Tasks go to a role's queue (any agent of the role takes each
// task once) or to one agent; results, events and heartbeats come back.
const (
	// TasksAll matches every task subject (what an orchestrator may publish).
	TasksAll = "tasks.>"
	// ResultSubject carries every task's result (wire.Result).
	ResultSubject = "task.result"
	// Broadcast is what an orchestrator says to every worker.
	Broadcast = "broadcast"
	// AllHeartbeats and AllEvents match every agent's.
	AllHeartbeats = "agent.*.heartbeat"
	AllEvents     = "agent.*.events"
	// StatusSubject is answered by the bus (flockctl serve) with BusStatus.
	StatusSubject = "flock.bus.status"
	// ReloadSubject asks the bus to re-read its configuration; the reply is
	// empty on success or the error text.
	ReloadSubject = "flock.bus.reload"
	// Reserved is the bus's own subject space: no spec may grant it.
	Reserved = "flock.>"
)

// RoleTasks is the subject of tasks for any agent of role; the bus keeps
// them in TasksStream until one agent of the role (through the shared
// consumer RoleConsumer(role)) has stored their result.
func RoleTasks(role string) string { return "tasks." + role }

// AgentTasks is the subject of tasks addressed to agent id alone.
func AgentTasks(id int) string { return "tasks.agent." + strconv.Itoa(id) }

// AddressedTo is id for AgentTasks(id).
func AddressedTo(subject string) (int, bool) {
	n, ok := strings.CutPrefix(subject, "tasks.agent.")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(n)
	return id, err == nil && AgentTasks(id) == subject
}

// AgentOf is the agent a per-agent subject of the proxy's or the desk's
// names: subjects is the wildcard its kind is heard on (EgressSubjects,
// UsageSubjects, LeasesSubjects, TaskSpendSubjects), subject one it
// matched. ok is false unless what the wildcard stands for is one agent
// id as the subject's own function writes it.
func AgentOf(subject, subjects string) (int, bool) {
	n, ok := strings.CutPrefix(subject, strings.TrimRight(subjects, "*>"))
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(n)
	return id, err == nil && id > 0 && strconv.Itoa(id) == n
}

// AgentSubjects is everything agent id may publish under its own name.
func AgentSubjects(id int) string { return "agent." + strconv.Itoa(id) + ".>" }

// Heartbeat is where agent id says it is alive.
func Heartbeat(id int) string { return "agent." + strconv.Itoa(id) + ".heartbeat" }

// Events is where agent id reports what it did.
func Events(id int) string { return "agent." + strconv.Itoa(id) + ".events" }

// Inbox is agent id's private reply prefix: only it may subscribe below
// it. Clients set it as their inbox prefix (nats.go CustomInboxPrefix,
// the nats CLI --inbox-prefix).
func Inbox(id int) string { return "_INBOX.flock-" + strconv.Itoa(id) }

// Header names of a task message; its body is the task's payload (what
// flock-agent writes to the command's stdin). A result message carries
// the task's id and subject too, and MsgIDHeader set to ResultMsgID(id).
const (
	TaskIDHeader = "Flock-Task-Id"
	// TaskSubjectHeader is, on a result or a dead letter, the subject the
	// task was sent to (tasks.worker, tasks.agent.3).
	TaskSubjectHeader = "Flock-Task-Subject"
	// DeliveriesHeader is, on a dead letter, how often the task was
	// handed to a worker before the bus gave up on it.
	DeliveriesHeader = "Flock-Deliveries"
	// MsgIDHeader is JetStream's deduplication id: a second message with
	// the same id within the stream's window is acknowledged, not stored.
	// flockctl send sets it to the task id.
	MsgIDHeader = "Nats-Msg-Id"
)

// Result is what an agent publishes on ResultSubject (and answers to a
// task's reply subject) when a task ends.
type Result struct {
	TaskID     string  `json:"task_id"`
	Agent      int     `json:"agent"`
	OK         bool    `json:"ok"`
	ExitStatus int     `json:"exit_status"` // -1 if the command did not exit by itself
	Output     string  `json:"output"`      // stdout, at most the agent's max_output
	Stderr     string  `json:"stderr,omitempty"`
	Truncated  bool    `json:"truncated"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"` // why it failed, in words: "timed out after 5s"
	// Spend is what the task's model requests spent, as flock-proxy
	// counted them (set by the desk, never the worker; absent when the
	// proxy did not answer, or the bus stored the result itself).
	Spend *TaskSpend `json:"spend,omitempty"`
}

// HeartbeatMsg is what an agent publishes on Heartbeat(id).
type HeartbeatMsg struct {
	Agent       int       `json:"agent"`
	Time        time.Time `json:"time"`
	UptimeS     float64   `json:"uptime_s"`
	RSSBytes    uint64    `json:"rss_bytes"`
	TasksDone   uint64    `json:"tasks_done"`
	TasksFailed uint64    `json:"tasks_failed"`
}

// Event is what an agent publishes on Events(id).
type Event struct {
	Agent int            `json:"agent"`
	Time  time.Time      `json:"time"`
	Kind  string         `json:"kind"`
	Data  map[string]any `json:"data,omitempty"`
}

// BusStatus is the bus's answer on StatusSubject.
type BusStatus struct {
	Started time.Time `json:"started"`
	Config  string    `json:"config"` // the digest of the config in force (bus.Config.Digest)
	// Sync is how JetStream brings what it stores to the disk, as the
	// spec's bus.sync says it: "always", or an interval. "" is a bus from
	// before the field, which synced every 2m.
	Sync string `json:"sync,omitempty"`
	// Store is what the bus found unproven in its store when it started,
	// and what it did; empty when the store proved itself.
	Store  []StoreProblem     `json:"store,omitempty"`
	Agents map[int]AgentOnBus `json:"agents"` // by agent id; absent: never seen
	// NoQuorum, in a cluster, is why this host's side cannot store tasks
	// now (the bus refuses those published here with it); "" when it can.
	NoQuorum string `json:"no_quorum,omitempty"`
}

// StoreProblem is one part of the bus's store that did not prove itself
// at its start (a torn or flipped record, a state file it could not read),
// or a store the operator set aside.
type StoreProblem struct {
	Stream string `json:"stream"`
	File   string `json:"file,omitempty"` // in the store
	What   string `json:"what"`
	// PutBack: messages that proved themselves past the damage (or in a
	// store set aside) and are in the streams again; LostBytes prove
	// nothing and are gone.
	PutBack   int    `json:"put_back,omitempty"`
	LostBytes int    `json:"lost_bytes,omitempty"`
	Aside     string `json:"aside,omitempty"` // where the damaged files are kept
}

// AgentOnBus is what the bus knows of one agent.
type AgentOnBus struct {
	Connections   int           `json:"connections"`
	LastHeartbeat *HeartbeatMsg `json:"last_heartbeat,omitempty"` // its body, as far as it could be read
	HeartbeatAt   *time.Time    `json:"heartbeat_at,omitempty"`   // when the bus received it
	// ViolationsTotal is every violation the bus counted for the agent
	// (kept across bus restarts); Violations has them by kind
	// (ViolationKinds). The total keeps the key "violations" it always
	// had, so a flockctl and a bus of different versions still agree.
	ViolationsTotal uint64            `json:"violations"`
	Violations      map[string]uint64 `json:"violations_by_kind,omitempty"`
	Holding         int               `json:"holding,omitempty"` // tasks the task desk handed it that it has not finished
	Waiting         int               `json:"waiting,omitempty"` // its asks for a task the desk holds
	// Models is the model gateway's last report of the agent's use of
	// its model APIs (absent: none since the bus started).
	Models *ModelReport `json:"models,omitempty"`
}

// Kinds of violation the bus counts per agent.
const (
	ViolationPublish   = "publish"   // published where its permissions do not allow
	ViolationSubscribe = "subscribe" // subscribed where its permissions do not allow
	// A result or ack for a task it does not hold: a lease it forged, one
	// that expired, or a reply to a task delivered to another agent.
	ViolationForgedLease  = "forged-lease"
	ViolationStaleLease   = "stale-lease"
	ViolationForeignReply = "foreign-reply"
	ViolationFlood        = "flood"     // messages faster than any agent needs (counted once per window)
	ViolationMalformed    = "malformed" // a message the bus could not read
	// Over a share (spec shares, bus.max_subscriptions, bus.max_pending):
	// refused at once, and counted.
	ViolationConnections   = "connections"   // a connection beyond its shares.connections
	ViolationSubscriptions = "subscriptions" // a subscription beyond a connection's bus.max_subscriptions
	ViolationSlowConsumer  = "slow-consumer" // a connection that read too slowly: closed at bus.max_pending
	ViolationPayload       = "payload"       // a message larger than the bus carries
	ViolationTasks         = "tasks"         // a task beyond its shares.tasks or shares.task_bytes
	ViolationTunnels       = "tunnels"       // a proxy connection beyond its shares.tunnels
	ViolationHandshakes    = "handshakes"    // a proxy connection beyond its shares.handshakes
)

// ViolationKinds is every kind, in the order status prints them.
var ViolationKinds = []string{ViolationPublish, ViolationSubscribe, ViolationForgedLease, ViolationStaleLease,
	ViolationForeignReply, ViolationFlood, ViolationMalformed, ViolationConnections, ViolationSubscriptions,
	ViolationSlowConsumer, ViolationPayload, ViolationTasks, ViolationTunnels, ViolationHandshakes}

// OnServer is subject as the bus of one host of a multi-host flock
// answers it (flock.bus.status.<server>): every bus hears every subject
// across the cluster, and a queue group would not keep a request on its
// host (nats-server hands a client's message to a random member, remote
// ones included), so each bus answers its own requests under its own
// name. server "" (one host) leaves subject as it is.
func OnServer(subject, server string) string {
	if server == "" {
		return subject
	}
	return subject + "." + server
}
