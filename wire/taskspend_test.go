package wire

import (
	"strings"
	"testing"
)

// Unit tier. A task's budget crosses the bus as a header: what String
// writes, ParseTaskBudget reads back, and what it refuses names the fix.
func TestTaskBudgetRoundTrip(t *testing.T) {
	for _, b := range []TaskBudget{{}, {Tokens: 200000}, {USD: USD / 2}, {Tokens: 1, USD: 375}} {
		got, err := ParseTaskBudget(b.String())
		if err != nil || got != b {
			t.Errorf("ParseTaskBudget(%q) = %+v, %v; want %+v", b.String(), got, err, b)
		}
	}
	if got, err := ParseTaskBudget(" usd=0.50, tokens=10"); err != nil || got != (TaskBudget{Tokens: 10, USD: USD / 2}) {
		t.Errorf("spaces after commas: %+v, %v", got, err)
	}
	for _, bad := range []string{"usd", "tokens=0", "tokens=-1", "usd=0", "usd=abc", "usd=1,usd=2", "eur=3", "tokens=1;usd=2"} {
		_, err := ParseTaskBudget(bad)
		if err == nil || !strings.Contains(err.Error(), TaskBudgetHeader) || !strings.Contains(err.Error(), "e.g.") {
			t.Errorf("ParseTaskBudget(%q): %v, want an error naming the header and the fix", bad, err)
		}
	}
}

// Unit tier. A task's headers carry its budget in any case of the
// header's name; none is nil, a malformed one an error naming the header.
func TestTaskBudgetOf(t *testing.T) {
	for _, tc := range []struct {
		h    map[string][]string
		want *TaskBudget
		bad  bool
	}{
		{h: nil},
		{h: map[string][]string{"Flock-Task-Id": {"x"}}},
		{h: map[string][]string{TaskBudgetHeader: {""}}},
		{h: map[string][]string{TaskBudgetHeader: {"tokens=5"}}, want: &TaskBudget{Tokens: 5}},
		{h: map[string][]string{"flock-task-budget": {"usd=0.5"}}, want: &TaskBudget{USD: USD / 2}},
		{h: map[string][]string{TaskBudgetHeader: {"dollars=5"}}, bad: true},
	} {
		got, err := TaskBudgetOf(tc.h)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), TaskBudgetHeader)):
			t.Errorf("TaskBudgetOf(%v): %+v, %v; want an error naming %s", tc.h, got, err, TaskBudgetHeader)
		case !tc.bad && (err != nil || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want):
			t.Errorf("TaskBudgetOf(%v) = %+v, %v; want %+v", tc.h, got, err, tc.want)
		}
	}
}

// Unit tier. The smaller of each limit applies; 0 is none.
func TestTaskBudgetWithin(t *testing.T) {
	for _, tc := range []struct{ a, b, want TaskBudget }{
		{TaskBudget{}, TaskBudget{}, TaskBudget{}},
		{TaskBudget{Tokens: 5}, TaskBudget{}, TaskBudget{Tokens: 5}},
		{TaskBudget{Tokens: 5, USD: 9}, TaskBudget{Tokens: 7, USD: 3}, TaskBudget{Tokens: 5, USD: 3}},
		{TaskBudget{USD: 9}, TaskBudget{Tokens: 7}, TaskBudget{Tokens: 7, USD: 9}},
	} {
		if got := tc.a.Within(tc.b); got != tc.want {
			t.Errorf("%+v.Within(%+v) = %+v, want %+v", tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.Within(tc.a); got != tc.want {
			t.Errorf("%+v.Within(%+v) = %+v, want %+v", tc.b, tc.a, got, tc.want)
		}
	}
}

// Unit tier. The proxy's answer and the desk's question round-trip, and
// a request without a task's place is refused.
func TestTaskSpendRoundTrip(t *testing.T) {
	s := TaskSpend{Requests: 3, Tokens: Tokens{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 7}, Cost: 123456789,
		Budget: &TaskBudget{USD: USD}, OutOfBudget: true}
	b, err := EncodeTaskSpend(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTaskSpend(b)
	if err != nil || got.Requests != 3 || got.Tokens != s.Tokens || got.Cost != s.Cost || *got.Budget != *s.Budget || !got.OutOfBudget {
		t.Errorf("round trip of %s: %+v, %v", b, got, err)
	}
	if l := got.Line(); l != "22 tokens, $0.000123 in 3 requests (out of its budget usd=1)" {
		t.Errorf("Line() = %q", l)
	}
	r, err := ParseTaskSpendRequest(EncodeTaskSpendRequest(TaskSpendRequest{Seq: 12, Final: true}))
	if err != nil || r != (TaskSpendRequest{Seq: 12, Final: true}) {
		t.Errorf("request round trip: %+v, %v", r, err)
	}
	if _, err := ParseTaskSpendRequest([]byte(`{}`)); err == nil {
		t.Error("a request without seq was read")
	}
}
