package gateway

// Tier: unit.

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/wire"
)

// The counts survive the proxy: closed cleanly, killed without a word
// (the log replayed), killed mid-line (the torn line dropped), and killed
// between a snapshot and emptying the log (nothing counted twice).
func TestStoreSurvivesTheProxy(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 5, 31, 23, 0, 0, 0, time.UTC)
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		o := Outcome{At: at.Add(time.Duration(i) * 10 * time.Minute), Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 5, CacheWriteTokens: 1}},
			Status: 200, Duration: time.Duration(i) * 100 * time.Millisecond}
		if i == 9 {
			o.Status = 529
		}
		if err := s.Record(3, "anthropic", o); err != nil {
			t.Fatal(err)
		}
	}
	s.Refused(3, "anthropic", LimitRPM)
	want := s.Usage(3)
	if u := want["anthropic"]; u.Requests != 10 || u.InputTokens != 1000 || u.Errors["529"] != 1 ||
		u.Day != "2026-06-01" || u.DayRequests != 4 || u.DayTokens != 4*116 || u.Month != "2026-06" || u.MonthTokens != 4*116 {
		t.Fatalf("counts: %+v", u)
	}

	// Killed: the log is all there is (the file is left open, unsynced).
	reopened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := reopened.Usage(3)
	want["anthropic"] = withoutRefusals(want["anthropic"])
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after a kill:\n got %+v\nwant %+v", got, want)
	}

	// Killed mid-line: the torn line is dropped, the rest counts.
	if err := reopened.Record(3, "anthropic", Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{OutputTokens: 7}}, Status: 200}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, logFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":99,"at":1,"agent":3,"provider":"anthropic","out":100`)
	f.Close()
	third, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u := third.Usage(3)["anthropic"]; u.Requests != 11 || u.OutputTokens != 107 {
		t.Errorf("after a torn line: %+v", u)
	}

	// Killed after the snapshot, before the log was emptied: the lines
	// the snapshot holds are not counted again.
	if err := third.Record(3, "openai", Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: 1}}, Status: 200}); err != nil {
		t.Fatal(err)
	}
	logBefore, _ := os.ReadFile(filepath.Join(dir, logFile))
	if err := third.Snapshot(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, logFile), logBefore, 0o600)
	fourth, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u := fourth.Usage(3); u["openai"].Requests != 1 || u["anthropic"].Requests != 11 {
		t.Errorf("after a kill between snapshot and truncation: %+v", u)
	}
	// Closed cleanly, refusals and all.
	fourth.Refused(3, "openai", LimitDay)
	if err := fourth.Close(); err != nil {
		t.Fatal(err)
	}
	fifth, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fifth.Usage(3), fourth.Usage(3)) || fifth.Usage(3)["openai"].Refused[LimitDay] != 1 {
		t.Errorf("after a clean close: %+v\nwant %+v", fifth.Usage(3), fourth.Usage(3))
	}
}

// withoutRefusals is u as the log alone has it: refusals are kept at
// snapshots, not per request.
func withoutRefusals(u wire.ModelUsage) wire.ModelUsage {
	u.Refused = nil
	return u
}

// A request under way when the proxy is killed was spent, how much is not
// known: the store counts it at what it reserved, once, marked estimated
// and cut, whether the proxy was killed before or after a compaction of
// the log, or between a compaction's snapshot and its emptying of the
// log; a request that ended is never counted again.
func TestStoreCountsRequestsUnderWayAtAKill(t *testing.T) {
	at := time.Date(2026, 5, 31, 23, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, dir string, s *Store)
	}{
		{"killed", func(*testing.T, string, *Store) {}},
		{"killed after a compaction", func(t *testing.T, _ string, s *Store) {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}},
		{"killed between a compaction's snapshot and its emptying of the log", func(t *testing.T, dir string, s *Store) {
			before, _ := os.ReadFile(filepath.Join(dir, logFile))
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, logFile), before, 0o600)
		}},
	} {
		dir := t.TempDir()
		s, err := OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		ended, _ := s.Begin(3, "anthropic", at, 40, 100, 0, 0)
		if err := s.Record(3, "anthropic", Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: 40, OutputTokens: 12}}, Status: 200, Begun: ended}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin(3, "anthropic", at, 50, 1000, 0, 0); err != nil { // under way at the kill
			t.Fatal(err)
		}
		tc.kill(t, dir, s)
		after, err := OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		u := after.Usage(3)["anthropic"]
		if u.Requests != 2 || u.InputTokens != 90 || u.OutputTokens != 1012 || u.EstimatedRequests != 1 || u.Errors[ErrorCut] != 1 {
			t.Errorf("%s: %+v; want the ended request and the one under way at its reservation (50 in, 1000 out)", tc.name, u)
		}
		// Opened again: counted once.
		again, err := OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		if v := again.Usage(3)["anthropic"]; v.Requests != 2 || v.OutputTokens != 1012 {
			t.Errorf("%s, opened again: %+v", tc.name, v)
		}
	}
}

// A budget's windows are its agents' spend from their counts when the
// policy is set, then each request of one of them as it is counted;
// yesterday's counts nothing today, and an agent outside counts nothing.
func TestStoreKeepsBudgetsWindows(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rec := func(agent int, provider string, at time.Time, tokens uint64, cost wire.PicoUSD) {
		t.Helper()
		if err := s.Record(agent, provider, Outcome{At: at, Usage: modelapi.Usage{Tokens: wire.Tokens{InputTokens: tokens}}, Cost: cost, Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	rec(1, "anthropic", now, 10, 100)
	rec(1, "openai", now, 20, 200)
	rec(2, "anthropic", now.AddDate(0, 0, -1), 40, 400) // yesterday: this month's only
	rec(3, "anthropic", now, 80, 800)
	s.SetGroups(map[string][]int{"team": {1, 2}, "all": {1, 2, 3}}, now)
	check := func(when, name string, day, month wire.Spend) {
		t.Helper()
		if d, m := s.Group(name, now); d != day || m != month {
			t.Errorf("%s: budget %s spent %+v today and %+v this month, want %+v and %+v", when, name, d, m, day, month)
		}
	}
	check("set", "team", wire.Spend{Tokens: 30, Cost: 300}, wire.Spend{Tokens: 70, Cost: 700})
	check("set", "all", wire.Spend{Tokens: 110, Cost: 1100}, wire.Spend{Tokens: 150, Cost: 1500})
	rec(2, "gemini", now, 5, 50)
	rec(3, "openai", now, 5, 50)
	check("counted", "team", wire.Spend{Tokens: 35, Cost: 350}, wire.Spend{Tokens: 75, Cost: 750})
	check("counted", "all", wire.Spend{Tokens: 120, Cost: 1200}, wire.Spend{Tokens: 160, Cost: 1600})
	if d, m := s.Group("none", now); d != (wire.Spend{}) || m != (wire.Spend{}) {
		t.Errorf("a budget not set: %+v %+v", d, m)
	}
}
