package events

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)

func at(s int, agent int, k Kind) Event {
	return Event{Time: t0.Add(time.Duration(s) * time.Second), Agent: agent, Kind: k, Detail: string(k)}
}

// TestStream: the sources' histories merged oldest first, cut at since,
// filtered by agent; then, following, each live event as it comes; a
// source that fails is the stream's error.
//
// Tier: unit (no root).
func TestStream(t *testing.T) {
	journal := &Fake{Past: []Event{at(1, 1, Started), at(5, 2, BusViolation), at(9, 1, Restarted)}, Live: make(chan Event)}
	counters := &Fake{Past: []Event{at(7, 2, FirewallRefused), at(-5, 1, Started)}, Live: make(chan Event)}
	for _, tc := range []struct {
		name string
		o    Options
		want []Event
	}{
		{"all since 0", Options{Since: t0}, []Event{at(1, 1, Started), at(5, 2, BusViolation), at(7, 2, FirewallRefused), at(9, 1, Restarted)}},
		{"since 6", Options{Since: t0.Add(6 * time.Second)}, []Event{at(7, 2, FirewallRefused), at(9, 1, Restarted)}},
		{"agent 2", Options{Since: t0, Agent: 2}, []Event{at(5, 2, BusViolation), at(7, 2, FirewallRefused)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Event
			if err := Stream(context.Background(), []Source{journal, counters}, tc.o, func(e Event) error { got = append(got, e); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan Event, 10)
		done := make(chan error, 1)
		go func() {
			done <- Stream(ctx, []Source{journal, counters}, Options{Since: t0.Add(8 * time.Second), Agent: 1, Follow: true},
				func(e Event) error { got <- e; return nil })
		}()
		if e := <-got; e != at(9, 1, Restarted) {
			t.Fatalf("history: %v", e)
		}
		counters.Live <- at(10, 2, FirewallRefused) // not agent 1's
		journal.Live <- at(11, 1, Started)
		if e := <-got; e != at(11, 1, Started) {
			t.Fatalf("live: %v", e)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stopped: %v", err)
		}
	})

	t.Run("a failing source", func(t *testing.T) {
		bad := &Fake{Err: errors.New("journalctl: no journal")}
		err := Stream(context.Background(), []Source{journal, bad}, Options{Since: t0}, func(Event) error { return nil })
		if err == nil || err.Error() != "journalctl: no journal" {
			t.Errorf("Stream: %v", err)
		}
	})
}

// TestCounterSource: the counters as they stand, then their growth, per
// agent; with the kernel log in the journal only what it lacks; a table
// written anew starts from zero.
//
// Tier: unit (no root).
func TestCounterSource(t *testing.T) {
	uid := func(id int) uint32 { return testUIDBase + uint32(id) }
	for _, tc := range []struct {
		name      string
		kernelLog bool
		reads     []map[uint32]Counts
		want      []string // agent: detail, history first
	}{
		{"no kernel log", false, []map[uint32]Counts{
			{uid(1): {Refused: 1000, Logged: 5}, uid(2): {}, 1000: {Refused: 3}},
			{uid(1): {Refused: 1000, Logged: 5}, uid(2): {Refused: 1, Logged: 1}},
			{uid(1): {Refused: 2, Logged: 2}, uid(2): {Refused: 1, Logged: 1}},
		}, []string{
			"1: 1000 packets refused by table inet flock since the table was last written (its per-uid counter; 5 logged to the kernel log, which this journal lacks)",
			"2: 1 packet refused by table inet flock (its per-uid counter; 1 logged to the kernel log, which this journal lacks)",
			"1: 2 packets refused by table inet flock (its per-uid counter; 2 logged to the kernel log, which this journal lacks)",
		}},
		{"kernel log", true, []map[uint32]Counts{
			{uid(1): {Refused: 5, Logged: 5}, uid(3): {Refused: 100, Logged: 5}},
			{uid(1): {Refused: 6, Logged: 6}, uid(3): {Refused: 150, Logged: 6}},
		}, []string{
			"3: 95 packets refused by table inet flock since the table was last written beyond its kernel-log limit (its per-uid counter; the 5 logged are events of their own)",
			"3: 49 packets refused by table inet flock beyond its kernel-log limit (its per-uid counter; the 1 logged are events of their own)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &CounterSource{UIDBase: testUIDBase, KernelLog: tc.kernelLog, Every: time.Millisecond, Now: func() time.Time { return t0 },
				Read: func(context.Context) (map[uint32]Counts, error) {
					r := tc.reads[min(n, len(tc.reads)-1)]
					if n++; n == len(tc.reads)+1 {
						cancel()
					}
					return r, nil
				}}
			hist, err := c.History(ctx, t0)
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan Event, 10)
			if err := c.Follow(ctx, out); err != nil {
				t.Fatal(err)
			}
			close(out)
			var got []string
			for _, e := range hist {
				got = append(got, e.text())
			}
			for e := range out {
				got = append(got, e.text())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func (e Event) text() string {
	if e.Kind != FirewallRefused || e.Source != "firewall-counters" || !e.Time.Equal(t0) {
		return "unexpected " + e.Text()
	}
	return string(rune('0'+e.Agent)) + ": " + e.Detail
}
