package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Entry is one journal entry as `journalctl -o json` prints it, each
// field's value as a string.
type Entry map[string]string

// ParseEntry reads one line of `journalctl -o json`. journalctl prints a
// value as a string, as an array of numbers when it is not valid UTF-8,
// as an array of values when the field repeats (the first is kept), and
// as null when it is too large to print (absent here).
func ParseEntry(line []byte) (Entry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, fmt.Errorf("a journal entry that is not JSON: %w", err)
	}
	e := Entry{}
	for k, v := range raw {
		if s, ok := fieldValue(v); ok {
			e[k] = s
		}
	}
	return e, nil
}

func fieldValue(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var b []byte
	var nums []int
	if json.Unmarshal(v, &nums) == nil {
		for _, n := range nums {
			b = append(b, byte(n))
		}
		return string(b), true
	}
	var many []json.RawMessage
	if json.Unmarshal(v, &many) == nil && len(many) > 0 {
		return fieldValue(many[0])
	}
	return "", false
}

// Time is when journald received the entry.
func (e Entry) Time() time.Time {
	us, err := strconv.ParseInt(e["__REALTIME_TIMESTAMP"], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(us)
}
