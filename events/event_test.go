package events

import (
	"strings"
	"testing"
	"time"
)

// TestEventRoundTrip: what flockctl events --output json writes, Decode
// reads back the same, for every kind; a line of another shape is refused.
//
// Tier: unit (no root).
func TestEventRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 8, 1, 2, 345678000, time.UTC)
	for _, k := range Kinds {
		e := Event{Time: at, Agent: 3, Kind: k, Detail: `a "quoted" detail, with ünïcode`, Source: "systemd"}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
			t.Errorf("%s: not one line: %q", k, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Time.Equal(e.Time) || got.Agent != e.Agent || got.Kind != e.Kind || got.Detail != e.Detail || got.Source != e.Source {
			t.Errorf("round trip of %+v gave %+v", e, got)
		}
	}
	for _, bad := range []string{
		`{"time":"2026-11-27T08:01:02Z","agent":1,"kind":"exploded","detail":"","source":""}`,
		`{"time":"2026-11-27T08:01:02Z","agent":1,"kind":"started","detail":"","source":"","extra":1}`,
		`not json`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) accepted it", bad)
		}
	}
}

// TestRecordRoundTrip: a Record's journal fields, read back as journalctl
// prints them (with journald's own fields beside), are the same Record,
// and make the same event through Map.
//
// Tier: unit (no root).
func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Kind: BusViolation, Agent: 2, Detail: "[ERR] line\nwith a newline", Extra: map[string]string{"VIOLATION": "publish", "SUPPRESSED": "12"}},
		{Kind: DeadLettered, Detail: "task t-1 (tasks.worker) dead-lettered after 5 deliveries", Extra: map[string]string{"TASK_ID": "t-1"}},
		{Kind: DriftRepaired, Agent: 65535, Detail: "repaired: start unit flock-agent@65535.service (not running)"},
		{Kind: StoreDamaged, Detail: "stream TASKS: 196 bytes from byte 588 fail their checksums", Extra: map[string]string{"STREAM": "TASKS", "PUT_BACK": "17"}},
	} {
		e := Entry{"MESSAGE": "x", "PRIORITY": "4", "SYSLOG_IDENTIFIER": "flockctl", "_UID": "0", "_SYSTEMD_UNIT": busUnit,
			"__REALTIME_TIMESTAMP": "1795766400000000"}
		for k, v := range r.Fields() {
			e[k] = v
		}
		got, ok := recordOf(e)
		want := r
		want.Detail = strings.ReplaceAll(r.Detail, "\n", " ")
		if want.Extra == nil {
			want.Extra = map[string]string{}
		}
		if !ok || got.Kind != want.Kind || got.Agent != want.Agent || got.Detail != want.Detail || len(got.Extra) != len(want.Extra) {
			t.Errorf("recordOf(%v) = %+v, %v; want %+v", e, got, ok, want)
		}
		for k, v := range want.Extra {
			if got.Extra[k] != v {
				t.Errorf("%s: %q, want %q", k, got.Extra[k], v)
			}
		}
		m, ok := Map(e, 2000000000)
		if !ok || m.Kind != r.Kind || m.Agent != r.Agent || m.Detail != want.Detail {
			t.Errorf("Map of the record %+v: %+v, %v", r, m.Event, ok)
		}
	}
}
