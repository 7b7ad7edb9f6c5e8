package wire

import (
	"strconv"
	"strings"
	"time"
)

// The streams the bus keeps (JetStream), and the durable consumers workers
// pull tasks through. Only the bus creates, changes or deletes them;
// agents may only pull from their own consumers and acknowledge what they
// were handed.
const (
	// TasksStream keeps every message on TasksAll until a worker has
	// stored its result and acknowledged it (a work queue).
	TasksStream = "TASKS"
	// ResultsStream keeps what is published on ResultSubject, one result
	// per task id.
	ResultsStream = "RESULTS"
	// DeadStream keeps the tasks no worker finished within the allowed
	// number of deliveries, on DeadSubject.
	DeadStream  = "DEAD"
	DeadSubject = "flock.dead.tasks"
)

// TaskDedupWindow is how long TasksStream remembers a task's MsgIDHeader:
// a task sent again with the same id within it is acknowledged as a
// duplicate, not stored.
const TaskDedupWindow = 10 * time.Minute

// RoleConsumer is the consumer of TasksStream that every agent of role
// pulls RoleTasks(role) from: each task goes to one of them.
func RoleConsumer(role string) string { return role }

// AgentConsumer is the consumer of TasksStream only agent id pulls
// AgentTasks(id) from.
func AgentConsumer(id int) string { return "agent-" + strconv.Itoa(id) }

// ResultMsgID is the deduplication id of task id's result: a second result
// for the same task (a worker died after storing the first but before
// acknowledging the task, and the task ran again) is not stored.
func ResultMsgID(taskID string) string { return "result-" + taskID }

// DeadMsgID is the deduplication id of task id's dead letter.
func DeadMsgID(taskID string) string { return "dead-" + taskID }

// TaskID is the id of the task stored at seq in TasksStream with headers
// h: its TaskIDHeader, else its MsgIDHeader, else one made of seq. Worker
// and bus derive the same id from the same message, so a redelivered task
// keeps its id and a result made by either deduplicates the other's.
func TaskID(h map[string][]string, seq uint64) string {
	for _, name := range []string{TaskIDHeader, MsgIDHeader} {
		if id := header(h, name); id != "" {
			return id
		}
	}
	return "seq-" + strconv.FormatUint(seq, 10)
}

// header reads a header by name; NATS headers are case-sensitive, but a
// person typing `nats pub -H flock-task-id:x` means the same header.
func header(h map[string][]string, name string) string {
	if v := h[name]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}
