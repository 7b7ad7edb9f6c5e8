package wire

import (
	"encoding/json"
	"fmt"
	"strings"
)

// An orchestrator sends a task through the desk too: a request on
// agent.N.task.send (so the subject names the sender), the task's subject
// in TaskSubjectHeader, the payload as body, its id in TaskIDHeader or
// MsgIDHeader. The desk stores it in TasksStream with SenderHeader set to
// N, within N's share of the stream (spec shares.tasks, task_bytes), and
// answers as JetStream would have (Sent), or refuses.
const DeskSend = "send"

// TaskGoneSubject is where a bus says a task left TasksStream (body: its
// stream sequence), so that every host's bus gives its sender's share
// back. Only buses (and the operator) may publish on flock.>.
const TaskGoneSubject = "flock.tasks.gone"

// SenderHeader is, on a task in TasksStream, the agent that sent it (set
// by the desk; a task the operator published has none).
const SenderHeader = "Flock-Sender"

// Refusals of a send that are not violations (RefusedOverShare is one).
const (
	RefusedNotSender = "not-sender"   // the agent may not send tasks (only orchestrators do)
	RefusedOverShare = ViolationTasks // the task would exceed its share of TasksStream
	RefusedFull      = "full"         // TasksStream is full: try again when tasks are done
)

// Sent is the desk's answer to a task stored: JetStream's own answer to a
// publish (its PubAck), so a client written for JetStream reads it alike.
type Sent struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// EncodeSent and ParseSent are the desk's answer and its reading.
func EncodeSent(s Sent) ([]byte, error) { return json.Marshal(s) }

func ParseSent(body []byte) (Sent, error) {
	var s Sent
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("the desk's answer to a send is JSON like {\"stream\":\"TASKS\",\"seq\":1} (%v)", err)
	}
	if s.Stream == "" || s.Seq == 0 {
		return s, fmt.Errorf("the desk's answer to a send names no stream and sequence: %q", body)
	}
	return s, nil
}

// SendMessage is the request that sends payload as a task on subject
// (tasks.worker, tasks.agent.N), with id as its task id and
// deduplication id ("": none; then the task is known by its place in the
// stream, and a send repeated is stored twice).
func SendMessage(subject, id string, payload []byte) (map[string][]string, []byte) {
	h := map[string][]string{TaskSubjectHeader: {subject}}
	if id != "" {
		h[TaskIDHeader] = []string{id}
		h[MsgIDHeader] = []string{id}
	}
	return h, payload
}

// ParseSend reads a send request's headers: the task's subject (one
// subject of TasksAll, no wildcard) and the headers the stored task
// keeps. The sender's own headers go along but for those of JetStream
// (Nats-*, other than its deduplication id) and flock's that only the
// desk sets; a task id without a deduplication id gets it as one, so a
// send repeated after a lost answer is not stored twice.
func ParseSend(h map[string][]string) (subject string, keep map[string][]string, err error) {
	subject = header(h, TaskSubjectHeader)
	if err := taskSubject(subject); err != nil {
		return "", nil, err
	}
	keep = map[string][]string{}
	for k, v := range h {
		lk := strings.ToLower(k)
		switch {
		case strings.EqualFold(k, MsgIDHeader):
			keep[MsgIDHeader] = v
		case strings.HasPrefix(lk, "nats-"), strings.EqualFold(k, SenderHeader), strings.EqualFold(k, TaskSubjectHeader),
			strings.EqualFold(k, LeaseHeader), strings.EqualFold(k, ErrorHeader), strings.EqualFold(k, RefusalHeader):
		default:
			keep[k] = v
		}
	}
	if id := header(h, TaskIDHeader); id != "" && header(keep, MsgIDHeader) == "" {
		keep[MsgIDHeader] = []string{id}
	}
	return subject, keep, nil
}

// taskSubject checks that s is one subject TasksStream keeps.
func taskSubject(s string) error {
	const fix = "set " + TaskSubjectHeader + " to the task's subject: tasks.worker, or tasks.agent.N for agent N alone"
	rest, ok := strings.CutPrefix(s, "tasks.")
	if !ok || rest == "" {
		return fmt.Errorf("%q is not a task subject; %s", s, fix)
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("%q is not one task subject (an empty token, a wildcard or a space); %s", s, fix)
		}
	}
	return nil
}
