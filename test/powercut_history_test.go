package test

// The history of a run with faults and the checker that reads it whole:
// every send the test saw confirmed, every result a sender saw, and what
// `flockctl tasks` said after each fault, on each host. Power cuts
// (TestVMPowerCutsLoseNothing), an upgrade (TestVMPackage), splits of a
// flock on three hosts (TestCluster, cluster_split_test.go). The checker
// judges the history, not a count.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flockrun/flock/operator"
)

// cutHistory is what the test saw, in order.
type cutHistory struct {
	workers []int
	// sent: ids whose send said "stored" (flockctl send --no-wait printed
	// the id, or a waiting send printed the result), by the cut they came
	// before.
	sent map[string]int
	// last: per sender's prefix, the highest n of <prefix>-<n> it
	// confirmed; it sends one at a time, so <prefix>-<last+1> may have
	// been stored unseen when the power went, and no later one was tried.
	last map[string]int
	// results: ids whose result a waiting send printed.
	results map[string]bool
	// seen: after each boot, what flockctl tasks listed (nil when that
	// boot's power was cut before the check).
	seen [][]operator.TaskEntry
}

func newCutHistory(workers ...int) *cutHistory {
	return &cutHistory{workers: workers, sent: map[string]int{}, last: map[string]int{}, results: map[string]bool{}}
}

// sender records that a sender of ids <prefix>-1, -2... started.
func (h *cutHistory) sender(prefix string) { h.last[prefix] = 0 }

// stored records a confirmed send of id before cut.
func (h *cutHistory) stored(id string, cut int) {
	h.sent[id] = cut
	if prefix, n, ok := splitTaskID(id); ok && n > h.last[prefix] {
		h.last[prefix] = n
	}
}

// tried says whether id may have been sent: confirmed, or the one a
// sender had in flight when the power went.
func (h *cutHistory) tried(id string) bool {
	if _, ok := h.sent[id]; ok {
		return true
	}
	prefix, n, ok := splitTaskID(id)
	last, known := h.last[prefix]
	return ok && known && n <= last+1
}

// splitTaskID splits <prefix>-<n>.
func splitTaskID(id string) (string, int, bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	return id[:i], n, err == nil && n > 0
}

// check judges the listing after a boot against everything before it:
// each problem is a line. final also wants every stored task done.
func (h *cutHistory) check(entries []operator.TaskEntry, final bool) []string {
	var bad []string
	state := map[string][]operator.TaskEntry{}
	for _, e := range entries {
		state[e.ID] = append(state[e.ID], e)
	}
	results := func(id string) int {
		n := 0
		for _, e := range state[id] {
			if e.State == operator.Done || e.State == operator.Dead {
				n++
			}
		}
		return n
	}
	for _, id := range slices.Sorted(maps.Keys(h.sent)) {
		es := state[id]
		switch {
		case len(es) == 0:
			bad = append(bad, fmt.Sprintf("task %s (stored before cut %d) is gone", id, h.sent[id]))
		case results(id) > 1:
			bad = append(bad, fmt.Sprintf("task %s has %d results", id, results(id)))
		case final && results(id) == 0:
			bad = append(bad, fmt.Sprintf("task %s (stored before cut %d) never got its result: %s", id, h.sent[id], describe(es)))
		case h.results[id] && results(id) == 0:
			bad = append(bad, fmt.Sprintf("task %s: its result was printed by send before cut %d, and is gone: %s", id, h.sent[id], describe(es)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(state)) {
		if !h.tried(id) {
			bad = append(bad, fmt.Sprintf("task %s: nobody sent it, and flockctl tasks lists it: %s", id, describe(state[id])))
			continue
		}
		if _, ok := h.sent[id]; !ok && results(id) > 1 {
			bad = append(bad, fmt.Sprintf("task %s (in flight at a cut) has %d results", id, results(id)))
		}
		for _, e := range state[id] {
			switch {
			case e.State == operator.Dead:
				bad = append(bad, fmt.Sprintf("task %s was dead-lettered after %d deliveries", id, e.Deliveries))
			case e.State == operator.Done && (e.OK == nil || !*e.OK || !slices.Contains(h.workers, e.Agent)):
				bad = append(bad, fmt.Sprintf("task %s: its result is not a success from a worker: %s", id, describe(state[id])))
			case e.State == operator.Running && e.Holder != 0 && !slices.Contains(h.workers, e.Holder):
				bad = append(bad, fmt.Sprintf("task %s is held by %d, not a worker", id, e.Holder))
			}
		}
	}
	// A result once listed stays: none is lost by a later cut.
	for _, earlier := range h.seen {
		for _, e := range earlier {
			if e.State == operator.Done && results(e.ID) == 0 {
				bad = append(bad, fmt.Sprintf("task %s had its result after an earlier boot; now: %s", e.ID, describe(state[e.ID])))
			}
		}
	}
	return bad
}

// checkHosts judges what each host of a flock listed after a fault
// (views, by host): each listing as check does, and the listings against
// each other: a result is one message of a replicated stream, so every
// host lists the same result for a task, by the same agent. Each problem
// names its host. The views join the history (seen).
func (h *cutHistory) checkHosts(views map[string][]operator.TaskEntry, final bool) []string {
	var bad []string
	done := map[string]map[string]int{} // task -> host -> agent of its result
	for _, host := range slices.Sorted(maps.Keys(views)) {
		for _, b := range h.check(views[host], final) {
			bad = append(bad, "on "+host+": "+b)
		}
		for _, e := range views[host] {
			if e.State == operator.Done {
				if done[e.ID] == nil {
					done[e.ID] = map[string]int{}
				}
				done[e.ID][host] = e.Agent
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(done)) {
		by := done[id]
		agents := map[int]bool{}
		for _, a := range by {
			agents[a] = true
		}
		if len(by) != len(views) || len(agents) > 1 {
			var s []string
			for _, host := range slices.Sorted(maps.Keys(views)) {
				if a, ok := by[host]; ok {
					s = append(s, fmt.Sprintf("done by agent %d on %s", a, host))
				} else {
					s = append(s, "not done on "+host)
				}
			}
			bad = append(bad, fmt.Sprintf("task %s: the hosts disagree: %s", id, strings.Join(s, ", ")))
		}
	}
	for _, host := range slices.Sorted(maps.Keys(views)) {
		h.seen = append(h.seen, views[host])
	}
	return bad
}

func describe(es []operator.TaskEntry) string {
	if len(es) == 0 {
		return "not listed"
	}
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%s (agent %d, holder %d)", e.State, e.Agent, e.Holder))
	}
	return strings.Join(s, ", ")
}

// Tier: unit. The checker finds each way a power cut can break the
// promise, and passes a history that keeps it.
func TestPowerCutChecker(t *testing.T) {
	yes := true
	done := func(id string, agent int) operator.TaskEntry {
		return operator.TaskEntry{ID: id, State: operator.Done, Agent: agent, OK: &yes}
	}
	queued := func(id string, st operator.TaskState, holder int) operator.TaskEntry {
		return operator.TaskEntry{ID: id, State: st, Holder: holder}
	}
	history := func() *cutHistory {
		h := newCutHistory(2, 3)
		h.sender("a")
		h.stored("a-1", 1)
		h.stored("a-2", 1)
		h.stored("r-1", 1)
		h.results["r-1"] = true
		h.seen = append(h.seen, []operator.TaskEntry{done("a-1", 2)})
		return h
	}
	ok := []operator.TaskEntry{done("a-1", 2), queued("a-2", operator.Running, 3), done("r-1", 2)}
	for _, tc := range []struct {
		name    string
		entries []operator.TaskEntry
		final   bool
		want    string // a problem's words; "" for none
	}{
		{"kept", ok, false, ""},
		{"the one in flight at the cut was stored too", append(ok, queued("a-3", operator.Pending, 0)), false, ""},
		{"a stored task gone", []operator.TaskEntry{done("a-1", 2), done("r-1", 2)}, false, "task a-2 (stored before cut 1) is gone"},
		{"two results", append(ok, done("a-1", 3)), false, "task a-1 has 2 results"},
		{"a result nobody sent", append(ok, done("b-1", 2)), false, "task b-1: nobody sent it"},
		{"past the one in flight", append(ok, queued("a-4", operator.Pending, 0)), false, "task a-4: nobody sent it"},
		{"a result send printed, gone", []operator.TaskEntry{done("a-1", 2), queued("a-2", operator.Pending, 0), queued("r-1", operator.Pending, 0)}, false,
			"task r-1: its result was printed by send before cut 1, and is gone"},
		{"an earlier result gone", []operator.TaskEntry{queued("a-1", operator.Pending, 0), queued("a-2", operator.Pending, 0), done("r-1", 2)}, false,
			"task a-1 had its result after an earlier boot"},
		{"dead-lettered", append(ok, operator.TaskEntry{ID: "a-2", State: operator.Dead, Deliveries: 5}), false, "task a-2 was dead-lettered"},
		{"held by a non-worker", []operator.TaskEntry{done("a-1", 2), queued("a-2", operator.Running, 7), done("r-1", 2)}, false, "task a-2 is held by 7"},
		{"a result from a non-worker", []operator.TaskEntry{done("a-1", 2), done("a-2", 0), done("r-1", 2)}, false, "task a-2: its result is not a success from a worker"},
		{"final: still running", ok, true, "task a-2 (stored before cut 1) never got its result"},
		{"final: all done", []operator.TaskEntry{done("a-1", 2), done("a-2", 3), done("r-1", 2)}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := history().check(tc.entries, tc.final)
			switch {
			case tc.want == "" && len(bad) > 0:
				t.Errorf("problems in a good history: %q", bad)
			case tc.want != "" && !strings.Contains(strings.Join(bad, "\n"), tc.want):
				t.Errorf("problems %q, want one saying %q", bad, tc.want)
			}
		})
	}
}

// Tier: unit. On several hosts the checker also finds hosts that list a
// task's result differently, and names the host of each problem.
func TestCutHistoryHosts(t *testing.T) {
	yes := true
	done := func(id string, agent int) operator.TaskEntry {
		return operator.TaskEntry{ID: id, State: operator.Done, Agent: agent, OK: &yes}
	}
	for _, tc := range []struct {
		name  string
		views map[string][]operator.TaskEntry
		want  []string
	}{
		{"agree", map[string][]operator.TaskEntry{"a": {done("a-1", 2)}, "b": {done("a-1", 2)}}, nil},
		{"one has it, one not", map[string][]operator.TaskEntry{"a": {done("a-1", 2)}, "b": {{ID: "a-1", State: operator.Pending}}},
			[]string{"task a-1: the hosts disagree: done by agent 2 on a, not done on b"}},
		{"by other agents", map[string][]operator.TaskEntry{"a": {done("a-1", 2)}, "b": {done("a-1", 3)}},
			[]string{"task a-1: the hosts disagree: done by agent 2 on a, done by agent 3 on b"}},
		{"gone on one", map[string][]operator.TaskEntry{"a": {done("a-1", 2)}, "b": nil},
			[]string{"on b: task a-1 (stored before cut 1) is gone", "task a-1: the hosts disagree: done by agent 2 on a, not done on b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCutHistory(2, 3)
			h.sender("a")
			h.stored("a-1", 1)
			bad := h.checkHosts(tc.views, false)
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(bad, "\n"), w) {
					t.Errorf("problems %q, want one saying %q", bad, w)
				}
			}
			if len(tc.want) == 0 && len(bad) > 0 {
				t.Errorf("problems in a good history: %q", bad)
			}
			if len(h.seen) != len(tc.views) {
				t.Errorf("%d views joined the history, want %d", len(h.seen), len(tc.views))
			}
		})
	}
}
