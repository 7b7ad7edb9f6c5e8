package bus

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"
	"sync"
)

// logger is the server's Logger: one line per message with a level tag,
// each nkey the server prints replaced by its user's name so an operator
// reads who did it, and permission violations counted per user.
type logger struct {
	mu         sync.Mutex
	w          io.Writer
	names      map[string]string // public nkey -> user name
	violations map[string]uint64 // by user name
	fatal      chan struct{}     // closed at the first Fatalf
	fatalMsg   string
}

func newLogger(w io.Writer) *logger {
	if w == nil {
		w = io.Discard
	}
	return &logger{w: w, names: map[string]string{}, violations: map[string]uint64{}, fatal: make(chan struct{})}
}

// nkeyLabel matches the server's "nkey:U..." label and bare public user keys.
var nkeyLabel = regexp.MustCompile(`(nkey:)?U[A-Z2-7]{55}`)

// learn adds the users of c to the names known; departed users keep
// theirs, so the lines about their disconnection still name them.
func (l *logger) learn(names map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.Copy(l.names, names)
}

func (l *logger) violationsByUser() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.violations)
}

// fatalError is the first fatal message, or "" if none came yet.
func (l *logger) fatalError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}

func (l *logger) line(level, format string, v []any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, v...), "\n", " ")
	l.mu.Lock()
	defer l.mu.Unlock()
	var who string
	msg = nkeyLabel.ReplaceAllStringFunc(msg, func(m string) string {
		name, ok := l.names[strings.TrimPrefix(m, "nkey:")]
		if !ok {
			return m
		}
		if who == "" {
			who = name
		}
		return name
	})
	if who != "" && (strings.Contains(msg, "Publish Violation") || strings.Contains(msg, "Subscription Violation")) {
		l.violations[who]++
	}
	fmt.Fprintf(l.w, "%s %s\n", level, msg)
}

// Levels are tagged as nats-server tags them (and serve its own lines), so
// the journal reads alike.
func (l *logger) Noticef(format string, v ...any) { l.line("[INF]", format, v) }
func (l *logger) Warnf(format string, v ...any)   { l.line("[WRN]", format, v) }
func (l *logger) Errorf(format string, v ...any)  { l.line("[ERR]", format, v) }
func (l *logger) Debugf(format string, v ...any)  { l.line("[DBG]", format, v) }
func (l *logger) Tracef(format string, v ...any)  { l.line("[TRC]", format, v) }

// Fatalf logs and records: the server calls it when it cannot go on (port
// taken), and the default logger would exit the whole process; Start
// turns it into an error instead.
func (l *logger) Fatalf(format string, v ...any) {
	l.line("[FTL]", format, v)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatalMsg == "" {
		l.fatalMsg = fmt.Sprintf(format, v...)
		close(l.fatal)
	}
}
