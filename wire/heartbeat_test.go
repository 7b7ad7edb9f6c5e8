package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Tier: unit. What flock-agent sends reads back as sent; what other
// clients send is read as far as it can be.
func TestParseHeartbeat(t *testing.T) {
	sent := HeartbeatMsg{Agent: 2, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), UptimeS: 1.5, RSSBytes: 7 << 20, TasksDone: 3, TasksFailed: 1}
	data, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseHeartbeat(data); err != nil || got != sent {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, sent)
	}
	for _, tc := range []struct {
		name, body string
		want       HeartbeatMsg
		err        string
	}{
		{"empty", "", HeartbeatMsg{}, ""},
		{"blank", " \n", HeartbeatMsg{}, ""},
		{"empty object", "{}", HeartbeatMsg{}, ""},
		{"id as a string", `{"agent":"2","uptime_s":9}`, HeartbeatMsg{Agent: 2, UptimeS: 9}, ""},
		{"id as a number", `{"agent":2}`, HeartbeatMsg{Agent: 2}, ""},
		{"unknown fields", `{"agent":2,"model":"x","tokens":{"in":1}}`, HeartbeatMsg{Agent: 2}, ""},
		{"nulls", `{"agent":null,"time":null}`, HeartbeatMsg{}, ""},
		{"not JSON", `alive`, HeartbeatMsg{}, "not a JSON object"},
		{"an array", `[1,2]`, HeartbeatMsg{}, "not a JSON object"},
		{"wrong types kept apart", `{"agent":"two","rss_bytes":"big","tasks_done":4}`, HeartbeatMsg{TasksDone: 4}, "agent, rss_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHeartbeat([]byte(tc.body))
			if got != tc.want {
				t.Errorf("ParseHeartbeat(%q) = %+v, want %+v", tc.body, got, tc.want)
			}
			if (err != nil) != (tc.err != "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseHeartbeat(%q) error %v, want %q", tc.body, err, tc.err)
			}
		})
	}
}
