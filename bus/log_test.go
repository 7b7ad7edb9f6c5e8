package bus

// Tier: unit (no root).

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
)

// clientFmt is the format nats-server hands the logger for a line about an
// authenticated client: the client's description (its name quoted with
// %q, then account and user) put in front of the line's own format.
func clientFmt(name, label, format string) string {
	return fmt.Sprintf("%s - %q - %q - %s", "127.0.0.1:5 - cid:6", "v1.55.0:go:"+name, "$G/"+label, format)
}

// TestLogger checks the lines the server's messages become: one per
// message, tagged, nkeys replaced by names, violations counted per agent
// and kind.
//
// Tier: unit (no root).
func TestLogger(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, "flock-2", "flock-3")
	k := ids.keys()
	stranger := strings.Repeat("U", 56)
	type count struct {
		agent int
		kind  string
	}
	for _, tc := range []struct {
		name       string
		log        func(l *logger)
		want       string
		violations map[count]int
	}{
		{"publish violation names the agent",
			func(l *logger) {
				l.Errorf(clientFmt("x", "nkey:"+k["flock-2"], "Publish Violation - Subject %q"), "agent.1.heartbeat")
			},
			`[ERR] 127.0.0.1:5 - cid:6 - "v1.55.0:go:x" - "$G/flock-2" - Publish Violation - Subject "agent.1.heartbeat"` + "\n",
			map[count]int{{2, "publish"}: 1}},
		{"subscription violation",
			func(l *logger) {
				l.Errorf(`127.0.0.1:5 - cid:7 - "$G/nkey:`+k["flock-3"]+`" - Subscription Violation - Subject %q, SID %s`, "flock.bus.>", "1")
			},
			`[ERR] 127.0.0.1:5 - cid:7 - "$G/flock-3" - Subscription Violation - Subject "flock.bus.>", SID 1` + "\n",
			map[count]int{{3, "subscribe"}: 1}},
		{"a bare key is named too, not counted",
			func(l *logger) { l.Errorf(`authentication error - Nkey %q`, k["flock-2"]) },
			`[ERR] authentication error - Nkey "flock-2"` + "\n",
			map[count]int{}},
		{"an unknown key stays a key",
			func(l *logger) {
				l.Errorf(clientFmt("x", "nkey:"+stranger, "Publish Violation - Subject %q"), "x")
			},
			`[ERR] 127.0.0.1:5 - cid:6 - "v1.55.0:go:x" - "$G/nkey:` + stranger + `" - Publish Violation - Subject "x"` + "\n",
			map[count]int{}},
		{"a rate-limited client line (the client an argument) is limited as the agent's",
			func(l *logger) {
				for range 3 {
					l.Errorf("%s - %s%s", stringer(`127.0.0.1:5 - cid:6 - "$G/nkey:`+k["flock-2"]+`"`), "maximum connections exceeded", "")
				}
			},
			`[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-2" - maximum connections exceeded` + "\n",
			map[count]int{}},
		{"one line per message, each level tagged",
			func(l *logger) {
				l.Noticef("a\nb")
				l.Warnf("w")
				l.Debugf("d")
				l.Tracef("t")
			},
			"[INF] a b\n[WRN] w\n[DBG] d\n[TRC] t\n",
			map[count]int{}},
		{"fatal is recorded, not an exit",
			func(l *logger) {
				l.Fatalf("Error listening on port: %s", "127.0.0.1:4222")
				l.Fatalf("second")
				if got := l.fatalError(); got != "Error listening on port: 127.0.0.1:4222" {
					t.Errorf("fatalError %q", got)
				}
			},
			"[FTL] Error listening on port: 127.0.0.1:4222\n[FTL] second\n",
			map[count]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			l := newLogger(&b)
			got := map[count]int{}
			l.count = func(agent int, kind string) { got[count{agent, kind}]++ }
			l.learn(map[string]user{k["flock-2"]: {"flock-2", 2}, k["flock-3"]: {"flock-3", 3}})
			tc.log(l)
			if b.String() != tc.want {
				t.Errorf("logged\n%q\nwant\n%q", b.String(), tc.want)
			}
			if !maps.Equal(got, tc.violations) {
				t.Errorf("violations %v, want %v", got, tc.violations)
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestClientLine checks attribution: the user is the one the server
// authenticated, whatever the client chose to call itself or wherever it
// published. Names and subjects below are an agent's choice.
//
// Tier: unit (no root).
func TestClientLine(t *testing.T) {
	t.Parallel()
	k1 := "nkey:U" + strings.Repeat("A", 55)
	k2 := "nkey:U" + strings.Repeat("B", 55)
	for _, tc := range []struct {
		name          string
		format        string
		label, rest   string
		notClientLine bool
	}{
		{"name, then account and user", clientFmt("probe", k1, "Publish Violation - Subject %q"), k1, "Publish Violation - Subject %q", false},
		{"no name", `127.0.0.1:5 - cid:6 - "$G/` + k1 + `" - Publish Violation - Subject %q`, k1, "Publish Violation - Subject %q", false},
		{"a name that looks like another agent's line",
			clientFmt(`x" - "$G/`+k2+`" - Publish Violation - Subject "y`, k1, "Publish Violation - Subject %q"), k1, "Publish Violation - Subject %q", false},
		{"a name with verbs and a backslash", clientFmt(`%s%q\"`, k1, "Subscription Violation - Subject %q, SID %s"), k1, "Subscription Violation - Subject %q, SID %s", false},
		{"before authentication", "127.0.0.1:5 - cid:9 - Client connection created", "", "Client connection created", false},
		{"a line of the server's own", `Starting nats-server - cid:3`, "", "", true},
		{"no client id", `127.0.0.1:5 - cid: - x`, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			label, rest, ok := clientLine(tc.format)
			if ok == tc.notClientLine || label != tc.label || rest != tc.rest {
				t.Errorf("clientLine(%q) = %q, %q, %v; want %q, %q, %v", tc.format, label, rest, ok, tc.label, tc.rest, !tc.notClientLine)
			}
		})
	}
}

// TestLimiter checks one line per user and kind a minute, the count of the
// rest when the window closes (by time, or by the next line), a shared
// window for unauthenticated clients, and that one user's flood leaves
// another's lines alone.
//
// Tier: unit (no root).
func TestLimiter(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	l := newLogger(&b)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	k1, k2 := "U"+strings.Repeat("A", 55), "U"+strings.Repeat("B", 55)
	l.learn(map[string]user{k1: {"flock-1", 1}, k2: {"flock-2", 2}})
	pub := func(key string) {
		l.Errorf(`127.0.0.1:5 - cid:6 - "$G/nkey:`+key+`" - Publish Violation - Subject %q`, "x")
	}
	for range 1000 {
		pub(k1)
		l.agentLine(1, "malformed", "[WRN]", "agent %d: bad", 1)
	}
	pub(k2)
	for range 20 {
		l.Warnf("127.0.0.1:7 - cid:8 - authentication error")
	}
	now = now.Add(30 * time.Second)
	l.closeWindows(false) // nothing over yet
	pub(k1)               // still held back
	now = now.Add(31 * time.Second)
	l.closeWindows(false)
	pub(k2) // a new window, nothing to say of the old one
	pub(k1)
	now = now.Add(time.Second)
	pub(k1)
	l.closeWindows(true)
	want := `[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-1" - Publish Violation - Subject "x"
[WRN] agent 1: bad
[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-2" - Publish Violation - Subject "x"
` + strings.Repeat("[WRN] 127.0.0.1:7 - cid:8 - authentication error\n", 10) +
		`[WRN] (10 more lines like it from unauthenticated clients in the last minute, not logged)
[WRN] (1000 more publish lines like it from agent 1 in the last minute, not logged)
[WRN] (999 more malformed lines like it from agent 1 in the last minute, not logged)
[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-2" - Publish Violation - Subject "x"
[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-1" - Publish Violation - Subject "x"
[WRN] (1 more publish lines like it from agent 1 in the last minute, not logged)
`
	if b.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", b.String(), want)
	}
}

// recWriter keeps the records the logger writes.
type recWriter struct {
	mu    sync.Mutex
	lines []string
	recs  []events.Record
}

func (w *recWriter) Write(msg string, _ events.Level, r events.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines, w.recs = append(w.lines, msg), append(w.recs, r)
	return nil
}

// of are the records of kind.
func (w *recWriter) of(kind events.Kind) []events.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []events.Record
	for _, r := range w.recs {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// TestViolationsAreRecords: with a record writer (serve's journal), each
// line about an agent's violation, and each count a window held back, is
// a bus-violation record of that agent with the same line; the other
// lines stay plain, and the rate limit is the same.
//
// Tier: unit (no root).
func TestViolationsAreRecords(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	l := newLogger(&b)
	rec := &recWriter{}
	l.rec = rec
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	k1 := "U" + strings.Repeat("A", 55)
	l.learn(map[string]user{k1: {"flock-1", 1}})
	for range 100 {
		l.Errorf(`127.0.0.1:5 - cid:6 - "$G/nkey:`+k1+`" - Publish Violation - Subject %q`, "agent.2.x")
	}
	l.agentLine(1, "forged-lease", "[WRN]", "flock-1 (agent 1): forged-lease violation: %s", "a lease of agent 2")
	l.Warnf("127.0.0.1:7 - cid:8 - authentication error")
	l.Noticef("Server is ready")
	now = now.Add(time.Minute)
	l.closeWindows(true)
	if want := "[WRN] 127.0.0.1:7 - cid:8 - authentication error\n[INF] Server is ready\n"; b.String() != want {
		t.Errorf("plain lines\n%q\nwant\n%q", b.String(), want)
	}
	want := []struct {
		line, kind, suppressed string
	}{
		{`[ERR] 127.0.0.1:5 - cid:6 - "$G/flock-1" - Publish Violation - Subject "agent.2.x"`, "publish", ""},
		{`[WRN] flock-1 (agent 1): forged-lease violation: a lease of agent 2`, "forged-lease", ""},
		{`[WRN] (99 more publish lines like it from agent 1 in the last minute, not logged)`, "publish", "99"},
	}
	if len(rec.recs) != len(want) {
		t.Fatalf("records %q, want %d", rec.lines, len(want))
	}
	for i, w := range want {
		r := rec.recs[i]
		if rec.lines[i] != w.line || r.Kind != events.BusViolation || r.Agent != 1 || "[ERR] "+r.Detail != w.line && "[WRN] "+r.Detail != w.line ||
			r.Extra["VIOLATION"] != w.kind || r.Extra["SUPPRESSED"] != w.suppressed {
			t.Errorf("record %d: %q %+v, want %+v", i, rec.lines[i], r, w)
		}
	}
}
