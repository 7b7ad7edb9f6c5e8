package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The task desk: a worker never touches JetStream. It asks the bus for a
// task, says it is still on it, hands in the result or gives the task
// back, each a request on a subject under its own agent.N.> (which only
// agent N may publish, so the subject names the asker). The answer comes
// to the asker's own inbox, and only there.
const (
	DeskNext     = "next"     // body NextRequest; answered with a task (HandedMessage) or none
	DeskProgress = "progress" // header LeaseHeader; still working
	DeskResult   = "result"   // header LeaseHeader, body Result: store it, then the task is done
	DeskRelease  = "release"  // header LeaseHeader; give the task back to the queue
	// DeskAll matches every agent's desk requests (what the bus hears).
	DeskAll = "agent.*.task.*"
)

// Desk is the subject of agent id's desk request verb.
func Desk(id int, verb string) string { return "agent." + strconv.Itoa(id) + ".task." + verb }

// DeskRequest is the agent and verb of a desk subject.
func DeskRequest(subject string) (id int, verb string, ok bool) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != "agent" || parts[2] != "task" {
		return 0, "", false
	}
	id, err := strconv.Atoi(parts[1])
	if err != nil || Desk(id, parts[3]) != subject {
		return 0, "", false
	}
	switch parts[3] {
	case DeskNext, DeskProgress, DeskResult, DeskRelease, DeskSend:
		return id, parts[3], true
	}
	return 0, "", false
}

// Headers of desk messages.
const (
	// LeaseHeader carries the lease of a task handed over: the worker
	// sends it back with progress, result and release.
	LeaseHeader    = "Flock-Lease"
	DeliveryHeader = "Flock-Delivery" // 1 the first time a task is handed out
	AckWaitHeader  = "Flock-Ack-Wait" // milliseconds the worker may be silent before the task goes to another
	// ErrorHeader is set on a refused request, with the reason in words;
	// RefusalHeader names the kind (one of the Refused* constants).
	ErrorHeader   = "Flock-Error"
	RefusalHeader = "Flock-Refusal"
)

// Kinds of refusal. The first four are violations: the bus records them
// against the asking agent.
const (
	RefusedForged    = ViolationForgedLease  // the lease was not made for this agent
	RefusedStale     = ViolationStaleLease   // the task went to another worker since
	RefusedForeign   = ViolationForeignReply // the answer would go to someone else's inbox (never answered)
	RefusedMalformed = ViolationMalformed    // the request cannot be read
	// Not violations:
	RefusedGone        = "gone"        // the task is no longer queued (done, or dead-lettered)
	RefusedNotStored   = "not-stored"  // the bus cannot store this result (too large); send a smaller one
	RefusedUnavailable = "unavailable" // try again
	RefusedNotWorker   = "not-worker"  // the agent takes no tasks
	RefusedTooMany     = "too-many"    // the agent has as many asks waiting as it may
)

// NextRequest asks for a task. Wait bounds how long the desk holds the
// ask (DefaultNextWait if 0, at most MaxNextWait); every ask gets exactly
// one answer, a task or none. Withdraw, instead, names the reply subject
// of an earlier ask of the same agent: that ask is answered at once
// (with a task if one was on its way, else none).
type NextRequest struct {
	WaitMS   int64  `json:"wait_ms,omitempty"`
	Withdraw string `json:"withdraw,omitempty"`
}

const (
	DefaultNextWait = 5 * time.Second
	MaxNextWait     = 30 * time.Second
)

// Wait is how long the desk holds the ask.
func (r NextRequest) Wait() time.Duration {
	if r.WaitMS <= 0 {
		return DefaultNextWait
	}
	return min(time.Duration(r.WaitMS)*time.Millisecond, MaxNextWait)
}

// ParseNextRequest reads a next request; an empty body is the default ask.
func ParseNextRequest(body []byte) (NextRequest, error) {
	var r NextRequest
	if len(body) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("a next request is JSON like {\"wait_ms\":5000} (%v)", err)
	}
	if r.WaitMS < 0 {
		return r, fmt.Errorf("negative wait_ms %d", r.WaitMS)
	}
	return r, nil
}

// Handed is a task as the desk hands it to a worker.
type Handed struct {
	ID       string
	Subject  string // tasks.worker, or tasks.agent.N
	Payload  []byte
	Delivery uint64
	Lease    string
	AckWait  time.Duration
}

// HandedMessage is h as the desk's answer: headers and the payload as body.
func HandedMessage(h Handed) (map[string][]string, []byte) {
	return map[string][]string{
		TaskIDHeader:      {h.ID},
		TaskSubjectHeader: {h.Subject},
		DeliveryHeader:    {strconv.FormatUint(h.Delivery, 10)},
		AckWaitHeader:     {strconv.FormatInt(h.AckWait.Milliseconds(), 10)},
		LeaseHeader:       {h.Lease},
	}, h.Payload
}

// Refusal is the desk's "no": its kind and reason.
type Refusal struct{ Kind, Reason string }

func (r *Refusal) Error() string { return "the bus's task desk refused (" + r.Kind + "): " + r.Reason }

// RefusalMessage is r as the desk's answer.
func RefusalMessage(r Refusal) map[string][]string {
	return map[string][]string{ErrorHeader: {r.Reason}, RefusalHeader: {r.Kind}}
}

// ParseRefusal is the refusal in a desk answer, nil if it is none.
func ParseRefusal(h map[string][]string) *Refusal {
	reason, kind := header(h, ErrorHeader), header(h, RefusalHeader)
	if reason == "" && kind == "" {
		return nil
	}
	return &Refusal{Kind: kind, Reason: reason}
}

// ParseHanded reads the desk's answer to a next request: the task, or
// ok false if it had none; a refusal is a *Refusal error.
func ParseHanded(h map[string][]string, body []byte) (Handed, bool, error) {
	if r := ParseRefusal(h); r != nil {
		return Handed{}, false, r
	}
	lease := header(h, LeaseHeader)
	if lease == "" {
		return Handed{}, false, nil
	}
	d := Handed{ID: header(h, TaskIDHeader), Subject: header(h, TaskSubjectHeader), Payload: body, Lease: lease}
	var err error
	if d.Delivery, err = strconv.ParseUint(header(h, DeliveryHeader), 10, 64); err != nil {
		return d, false, fmt.Errorf("the desk's %s header: %w", DeliveryHeader, err)
	}
	ms, err := strconv.ParseInt(header(h, AckWaitHeader), 10, 64)
	if err != nil {
		return d, false, fmt.Errorf("the desk's %s header: %w", AckWaitHeader, err)
	}
	d.AckWait = time.Duration(ms) * time.Millisecond
	if d.ID == "" || d.Subject == "" {
		return d, false, errors.New("the desk handed a task without its id or subject")
	}
	return d, true, nil
}
