package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ParseHeartbeat reads a heartbeat's body leniently: any message on
// Heartbeat(id) is agent id's heartbeat, whatever client sent it, so every
// field is optional, unknown fields are ignored, and the id may be a number
// or a string (the id that counts is the subject's). An empty body is a
// heartbeat with no fields. The error says what could not be read (a body
// that is not a JSON object, a field of the wrong type); the fields that
// could be read are returned with it, and the heartbeat still counts.
func ParseHeartbeat(data []byte) (HeartbeatMsg, error) {
	var hb HeartbeatMsg
	if len(bytes.TrimSpace(data)) == 0 {
		return hb, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return hb, fmt.Errorf("not a JSON object: %w", err)
	}
	var bad []string
	read := func(name string, into any) {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return
		}
		if err := json.Unmarshal(raw, into); err != nil {
			bad = append(bad, name)
		}
	}
	if raw, ok := fields["agent"]; ok && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = json.RawMessage(s)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			hb.Agent = n
		} else {
			bad = append(bad, "agent")
		}
	}
	read("time", &hb.Time)
	read("uptime_s", &hb.UptimeS)
	read("rss_bytes", &hb.RSSBytes)
	read("tasks_done", &hb.TasksDone)
	read("tasks_failed", &hb.TasksFailed)
	if len(bad) > 0 {
		return hb, fmt.Errorf("fields of the wrong type: %s", strings.Join(bad, ", "))
	}
	return hb, nil
}
