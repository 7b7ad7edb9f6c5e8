package proxy

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// denyBurst denials of one agent for one reason are logged per
// denyWindow; the rest are counted and the count rides on the next one
// logged for that reason (SUPPRESSED=), so one agent retrying in a loop
// cannot drown the journal, and the bus counts each reason's exactly (a
// denial over a share is a violation of its kind).
const (
	denyBurst  = 10
	denyWindow = time.Minute
	// secretBurst bounds the refusals of a secret's requests logged: an
	// agent's tool retrying a refused request (a 403 it does not read)
	// is a few events a minute, not one per retry.
	secretBurst = 3
)

// Journal writes each Record as one journal entry with its fields
// (AGENT_ID=, NAME=, PORT=, ADDR=, BYTES_UP=, BYTES_DOWN=, DURATION=,
// REASON=), or as a line to Fallback when there is no journald.
type Journal struct {
	Fallback io.Writer
	Now      func() time.Time
	Send     func(msg string, fields map[string]string) error // nil: journald
	// Also is told each record logged, and how many denials of its agent
	// were held back before it (the bus event; nil: none).
	Also func(r Record, suppressed int)

	mu     sync.Mutex
	denied map[denialKey]*window
}

// denialKey is whose denials, and why.
type denialKey struct {
	agent  int
	reason string
}

type window struct {
	start      time.Time
	logged     int
	suppressed int
}

// Record logs r, unless it is one denial too many of its agent this
// window. It says whether it logged.
func (j *Journal) Record(r Record) bool {
	f := r.Fields()
	held := 0
	if !r.Allowed() {
		n, ok := j.admit(denialKey{r.Agent, r.Reason})
		if !ok {
			return false
		}
		if n > 0 {
			f["SUPPRESSED"] = strconv.Itoa(n)
		}
		held = n
	}
	if j.Also != nil {
		defer j.Also(r, held)
	}
	msg := r.Message()
	if n := f["SUPPRESSED"]; n != "" {
		msg += " (" + n + " more denials of this agent for this reason not logged)"
	}
	send := j.Send
	if send == nil {
		if !journal.Enabled() {
			if j.Fallback != nil {
				fmt.Fprintln(j.Fallback, msg)
			}
			return true
		}
		send = func(m string, f map[string]string) error { return journal.Send(m, priority(r), f) }
	}
	if err := send(msg, f); err != nil && j.Fallback != nil {
		fmt.Fprintln(j.Fallback, msg)
	}
	return true
}

func priority(r Record) journal.Priority {
	if r.Allowed() {
		return journal.PriInfo
	}
	return journal.PriNotice
}

// admit says whether a denial may be logged now, and how many like it
// were held back before it.
func (j *Journal) admit(d denialKey) (int, bool) {
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	t := now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.denied == nil {
		j.denied = map[denialKey]*window{}
	}
	w := j.denied[d]
	if w == nil || t.Sub(w.start) >= denyWindow {
		held := 0
		if w != nil {
			held = w.suppressed
		}
		j.denied[d] = &window{start: t, logged: 1}
		return held, true
	}
	burst := denyBurst
	if d.reason == ReasonSecretRule || d.reason == ReasonSecretUnbound {
		burst = secretBurst
	}
	if w.logged < burst {
		w.logged++
		held := w.suppressed
		w.suppressed = 0
		return held, true
	}
	w.suppressed++
	return 0, false
}
