package bus

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// logger is the server's Logger: one line per message with a level tag,
// each nkey the server prints replaced by its user's name so an operator
// reads who did it. Lines about a client are attributed to the user the
// server authenticated it as, rate-limited per user and kind (limit.go),
// and its permission violations are counted (count).
type logger struct {
	mu       sync.Mutex
	w        io.Writer
	users    map[string]user // public nkey -> user
	count    func(agent int, kind string)
	limit    *limiter
	now      func() time.Time
	fatal    chan struct{} // closed at the first Fatalf
	fatalMsg string
	// refused, if set, says whether the gate refused connection cid over
	// its share: the gate logged that itself, under the agent's name, so
	// the server's own line about it (anonymous, before the client was
	// in) is left out rather than fill the unauthenticated clients'
	// window (gate.go).
	refused func(cid uint64) bool
	// rec, if set, gets the lines about an agent's violations as
	// structured records (the journal's FLOCK_EVENT=bus-violation, read
	// by flockctl events) instead of w: the same line, with fields.
	rec events.Writer
	// lost are the server's own words of store files it could not find,
	// until the bus tells them (storecheck.go, serverLosses).
	lost []string
}

// user is who an nkey is: its name, and its agent id (0: not an agent).
type user struct {
	name  string
	agent int
}

func newLogger(w io.Writer) *logger {
	if w == nil {
		w = io.Discard
	}
	return &logger{w: w, users: map[string]user{}, count: func(int, string) {}, limit: newLimiter(),
		now: time.Now, fatal: make(chan struct{})}
}

// nkeyLabel matches the server's "nkey:U..." label and bare public user keys.
var nkeyLabel = regexp.MustCompile(`(nkey:)?U[A-Z2-7]{55}`)

// learn adds users to those known; departed users keep their names, so
// the lines about their disconnection still name them.
func (l *logger) learn(users map[string]user) {
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.Copy(l.users, users)
}

// lostBlock is how the server's file store says, recovering a stream,
// that a block its index names is gone (nats-server v2.15).
const lostBlock = "could not locate msg block"

// takeLost returns the server's lines about lost store files since the
// last call.
func (l *logger) takeLost() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := l.lost
	l.lost = nil
	return lost
}

// fatalError is the first fatal message, or "" if none came yet.
func (l *logger) fatalError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}

// serverKinds are the violations the server reports, by how its line
// about the client goes on.
var serverKinds = []struct{ prefix, kind string }{
	{"Publish Violation - ", wire.ViolationPublish},
	{"Subscription Violation - ", wire.ViolationSubscribe},
	// nats-server logs this at most once every 2 s in the whole account
	// (Account.shouldLogMaxSubErr): the refusals are exact, their count
	// is not.
	{"maximum subscriptions exceeded", wire.ViolationSubscriptions},
	{"Slow Consumer Detected", wire.ViolationSlowConsumer},
	{"Slow Consumer %s: WriteDeadline", wire.ViolationSlowConsumer},
}

// payloadFormat is how nats-server words an oversized message, its first
// argument "maximum payload exceeded" (server.ErrMaxPayload).
const payloadFormat = "%s: %d vs %d"

func (l *logger) line(level, format string, v []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.Contains(format, lostBlock) {
		l.lost = append(l.lost, fmt.Sprintf(format, v...))
	}
	cf := clientFormat(format, v)
	label, rest, isClient := clientLine(cf)
	if isClient && cf == format {
		// The client's name is in the format: its % must print as itself,
		// not take the line's arguments (a subject) into the name.
		run := format[:len(format)-len(rest)]
		format = run[:strings.Index(run, " - cid:")] + " - cid:" + strings.ReplaceAll(run[strings.Index(run, " - cid:")+len(" - cid:"):], "%", "%%") + rest
	}
	if isClient && rest == "%v - %s" && len(v) > 0 && l.refused != nil {
		if err, ok := v[0].(error); ok && err.Error() == authError && l.refused(cidOf(cf)) {
			return
		}
	}
	var key *limitKey
	if isClient {
		k := limitKey{who: anonymous, kind: otherKind}
		if nkey, ok := strings.CutPrefix(label, "nkey:"); ok {
			if u, known := l.users[nkey]; known {
				k.who, k.agent = u.name, u.agent
			} else if label != "" {
				k.who = label // authenticated, but not a user we know: its own bucket
			}
		}
		for _, sk := range serverKinds {
			if strings.HasPrefix(rest, sk.prefix) {
				k.kind = sk.kind
			}
		}
		if rest == payloadFormat && len(v) == 3 && v[0] == "maximum payload exceeded" {
			k.kind = wire.ViolationPayload
		}
		if k.agent > 0 && k.kind != otherKind {
			l.count(k.agent, k.kind)
		}
		key = &k
	}
	l.emit(level, key, format, v)
}

// emit writes the line unless key's window is full; l.mu is held.
func (l *logger) emit(level string, key *limitKey, format string, v []any) {
	if key != nil {
		ok, summary := l.limit.allow(*key, l.now())
		if summary.n > 0 {
			l.summary(summary)
		}
		if !ok {
			return
		}
	}
	msg := nkeyLabel.ReplaceAllStringFunc(strings.ReplaceAll(fmt.Sprintf(format, v...), "\n", " "), func(m string) string {
		if u, ok := l.users[strings.TrimPrefix(m, "nkey:")]; ok {
			return u.name
		}
		return m
	})
	var r *events.Record
	if key != nil {
		r = violationRecord(*key, msg, 0)
	}
	l.write(level, msg, r)
}

// summary writes what a closed window held back; l.mu is held.
func (l *logger) summary(h heldBack) {
	l.write("[WRN]", h.String(), violationRecord(h.k, h.String(), h.n))
}

// write writes the line, as a record if it is one and l.rec is set (the
// plain line if the record cannot be written); l.mu is held.
func (l *logger) write(level, msg string, r *events.Record) {
	if r != nil && l.rec != nil {
		lv, ok := recordLevels[level]
		if !ok {
			lv = events.LevelInfo
		}
		if l.rec.Write(level+" "+msg, lv, *r) == nil {
			return
		}
	}
	fmt.Fprintf(l.w, "%s %s\n", level, msg)
}

var recordLevels = map[string]events.Level{"[ERR]": events.LevelError, "[FTL]": events.LevelError, "[WRN]": events.LevelWarning, "[INF]": events.LevelInfo}

// violationRecord is a line about an agent's violation of kind as an
// event (suppressed: how many like it a window held back); nil if the
// line is not about an agent's violation.
func violationRecord(k limitKey, msg string, suppressed int) *events.Record {
	if k.agent <= 0 || k.kind == otherKind {
		return nil
	}
	r := events.Record{Kind: events.BusViolation, Agent: k.agent, Detail: msg, Extra: map[string]string{"VIOLATION": k.kind}}
	if suppressed > 0 {
		r.Extra["SUPPRESSED"] = strconv.Itoa(suppressed)
	}
	return &r
}

// agentLine is a line about what agent did (kind: a wire.Violation* kind
// or otherKind), limited as the server's lines about it are.
func (l *logger) agentLine(agent int, kind, level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit(level, &limitKey{who: spec.UserName(agent), agent: agent, kind: kind}, format, v)
}

// record writes a line that is an event of its own (not rate-limited).
func (l *logger) record(level, msg string, r events.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(level, msg, &r)
}

// closeWindows writes what the windows over at now held back (all: every
// window, at shutdown).
func (l *logger) closeWindows(all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.limit.closed(l.now(), all) {
		l.summary(h)
	}
}

// clientFormat is the format of a line as it reads with a leading client
// argument spelled out: nats-server's rate-limited lines pass the client
// as "%s" (RateLimitErrorf), its other client lines put it in the format.
func clientFormat(format string, v []any) string {
	if rest, ok := strings.CutPrefix(format, "%s - "); ok && len(v) > 0 {
		if c, ok := v[0].(fmt.Stringer); ok {
			return c.String() + " - " + rest
		}
	}
	return format
}

// authError is nats-server's ErrAuthentication, which it logs for every
// refused connection.
const authError = "authentication error"

// cidOf is the connection id in a client line's format (0: none).
func cidOf(format string) uint64 {
	_, s, ok := strings.Cut(format, " - cid:")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseUint(s[:len(s)-len(strings.TrimLeft(s, "0123456789"))], 10, 64)
	return n
}

// clientLine reads the client the server's line is about:
//
//	<addr> - cid:<n>[ - "<lang:version:name>"][ - "<account>/<user>"] - <what>
//
// label is the user the server authenticated ("nkey:U...", "" before
// authentication), rest the <what>. It reads the format, not the line:
// the client's name is the client's choice and may hold quotes, verbs
// and anything that looks like another user, but the server quotes it
// (%q), so strconv.QuotedPrefix steps over it exactly; and the account
// and user the server adds after it is always the last quoted part.
// Subjects come later, in the arguments, and are never read here.
func clientLine(format string) (label, rest string, ok bool) {
	const cid = " - cid:"
	i := strings.Index(format, cid)
	if i < 0 || strings.ContainsAny(format[:i], `" `) {
		return "", "", false
	}
	s := format[i+len(cid):]
	n := len(s) - len(strings.TrimLeft(s, "0123456789"))
	if n == 0 {
		return "", "", false
	}
	s = s[n:]
	var last string
	for strings.HasPrefix(s, ` - "`) {
		q, err := strconv.QuotedPrefix(s[3:])
		if err != nil {
			break
		}
		last, _ = strconv.Unquote(q)
		s = s[3+len(q):]
	}
	rest = strings.TrimPrefix(s, " - ")
	if j := strings.LastIndex(last, "/"); j >= 0 && strings.HasPrefix(last[j+1:], "nkey:") {
		label = last[j+1:]
	}
	return label, rest, true
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
