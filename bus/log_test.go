package bus

// Tier: unit (no root).

import (
	"maps"
	"strings"
	"testing"
)

// TestLogger checks the lines the server's messages become: one per
// message, tagged, nkeys replaced by names, violations counted per user.
//
// Tier: unit (no root).
func TestLogger(t *testing.T) {
	ids := newIdentities(t, "flock-2", "flock-3")
	k := ids.keys()
	stranger := strings.Repeat("U", 56)
	for _, tc := range []struct {
		name       string
		log        func(l *logger)
		want       string
		violations map[string]uint64
	}{
		{"publish violation names the agent",
			func(l *logger) {
				l.Errorf("%s - Publish Violation - Subject %q", `127.0.0.1:5 - cid:6 - "v1.55.0:go" - "$G/nkey:`+k["flock-2"]+`"`, "agent.1.heartbeat")
			},
			`[ERR] 127.0.0.1:5 - cid:6 - "v1.55.0:go" - "$G/flock-2" - Publish Violation - Subject "agent.1.heartbeat"` + "\n",
			map[string]uint64{"flock-2": 1}},
		{"subscription violation",
			func(l *logger) {
				l.Errorf(`"$G/nkey:%s" - Subscription Violation - Subject "flock.bus.>", SID 1`, k["flock-3"])
			},
			`[ERR] "$G/flock-3" - Subscription Violation - Subject "flock.bus.>", SID 1` + "\n",
			map[string]uint64{"flock-3": 1}},
		{"a bare key is named too, not counted",
			func(l *logger) { l.Errorf(`authentication error - Nkey %q`, k["flock-2"]) },
			`[ERR] authentication error - Nkey "flock-2"` + "\n",
			map[string]uint64{}},
		{"an unknown key stays a key",
			func(l *logger) { l.Errorf(`"$G/nkey:%s" - Publish Violation - Subject "x"`, stranger) },
			`[ERR] "$G/nkey:` + stranger + `" - Publish Violation - Subject "x"` + "\n",
			map[string]uint64{}},
		{"one line per message, each level tagged",
			func(l *logger) {
				l.Noticef("a\nb")
				l.Warnf("w")
				l.Debugf("d")
				l.Tracef("t")
			},
			"[INF] a b\n[WRN] w\n[DBG] d\n[TRC] t\n",
			map[string]uint64{}},
		{"fatal is recorded, not an exit",
			func(l *logger) {
				l.Fatalf("Error listening on port: %s", "127.0.0.1:4222")
				l.Fatalf("second")
				if got := l.fatalError(); got != "Error listening on port: 127.0.0.1:4222" {
					t.Errorf("fatalError %q", got)
				}
			},
			"[FTL] Error listening on port: 127.0.0.1:4222\n[FTL] second\n",
			map[string]uint64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			l := newLogger(&b)
			l.learn(map[string]string{k["flock-2"]: "flock-2", k["flock-3"]: "flock-3"})
			tc.log(l)
			if b.String() != tc.want {
				t.Errorf("logged\n%q\nwant\n%q", b.String(), tc.want)
			}
			if got := l.violationsByUser(); !maps.Equal(got, tc.violations) {
				t.Errorf("violations %v, want %v", got, tc.violations)
			}
		})
	}
}
