package events

import (
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
)

// The fields of a Record in the journal. AGENT_ID is the proxy's name for
// the same thing, so `journalctl AGENT_ID=3` finds both.
const (
	FieldEvent  = "FLOCK_EVENT"  // the Kind
	FieldAgent  = "AGENT_ID"     // the agent's id; 0 or absent: the flock
	FieldDetail = "FLOCK_DETAIL" // the detail, one line
)

// Record is an event as one of flock's programs writes it to the journal
// (the bus's violations and dead letters, provision's drift), with any
// fields of its own (VIOLATION=publish, SUPPRESSED=12, TASK_ID=t-1).
// Fields and recordOf are the two directions of the same contract.
type Record struct {
	Kind   Kind
	Agent  int
	Detail string
	Extra  map[string]string
}

// Fields are r as journal fields.
func (r Record) Fields() map[string]string {
	f := maps.Clone(r.Extra)
	if f == nil {
		f = map[string]string{}
	}
	f[FieldEvent] = string(r.Kind)
	f[FieldAgent] = strconv.Itoa(r.Agent)
	f[FieldDetail] = strings.ReplaceAll(r.Detail, "\n", " ")
	return f
}

// recordOf reads a Record from an entry's fields (ok false: not one).
func recordOf(f map[string]string) (Record, bool) {
	k := Kind(f[FieldEvent])
	if k == "" {
		return Record{}, false
	}
	agent, err := strconv.Atoi(f[FieldAgent])
	if err != nil && f[FieldAgent] != "" {
		return Record{}, false
	}
	extra := map[string]string{}
	for key, v := range f {
		if key != FieldEvent && key != FieldAgent && key != FieldDetail && !strings.HasPrefix(key, "_") && !journalOwn[key] {
			extra[key] = v
		}
	}
	return Record{Kind: k, Agent: agent, Detail: f[FieldDetail], Extra: extra}, true
}

// journalOwn are the fields journald or the sending library add to every
// entry; they are not a Record's.
var journalOwn = map[string]bool{"MESSAGE": true, "PRIORITY": true, "SYSLOG_IDENTIFIER": true,
	"CODE_FILE": true, "CODE_LINE": true, "CODE_FUNC": true, "SYSLOG_FACILITY": true, "SYSLOG_PID": true}

// Level is a line's priority.
type Level int

// The levels flock's programs log records at.
const (
	LevelError Level = iota
	LevelWarning
	LevelNotice
	LevelInfo
)

// Writer writes records: to the journal with their fields, or, where
// there is no journald (a test, a terminal), as the plain line to
// Fallback.
type Writer interface {
	Write(msg string, level Level, r Record) error
}

// Journal is the Writer of flock's services: journald's native protocol
// (go-systemd's journal, no cgo). The message stays the plain line an
// operator reads in `journalctl -u`; the fields make it an event.
type Journal struct{ Fallback io.Writer }

// Write sends msg with r's fields; without journald, or if the send fails,
// it writes msg to Fallback.
func (j Journal) Write(msg string, level Level, r Record) error {
	if journal.Enabled() {
		err := journal.Send(msg, priorities[level], r.Fields())
		if err == nil {
			return nil
		}
		if j.Fallback == nil {
			return fmt.Errorf("sending %q to the journal: %w", msg, err)
		}
	}
	if j.Fallback != nil {
		_, err := fmt.Fprintln(j.Fallback, msg)
		return err
	}
	return nil
}

var priorities = map[Level]journal.Priority{LevelError: journal.PriErr, LevelWarning: journal.PriWarning,
	LevelNotice: journal.PriNotice, LevelInfo: journal.PriInfo}
