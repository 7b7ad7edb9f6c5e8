package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
)

// maxDriftRecords bounds the records of one run: after a reboot reconcile
// starts every agent again, and a thousand agents need not be a thousand
// entries.
const maxDriftRecords = 50

// sameSpec says whether f is the flock last provisioned: then whatever a
// provision changes is drift, not the operator's new wish.
func sameSpec(f *spec.Flock) bool {
	prev, err := plan.LoadState(plan.StatePath)
	if err != nil {
		return false
	}
	a, errA := json.Marshal(prev)
	b, errB := json.Marshal(f)
	return errA == nil && errB == nil && string(a) == string(b)
}

// recordDrift writes the changes p made (or, if applyErr, tried to make)
// to a host that had drifted from the provisioned flock, as journal
// records for flockctl events: one per agent, one for the flock's own.
func recordDrift(w events.Writer, p plan.Plan, applyErr error) {
	for _, r := range driftRecords(p, applyErr) {
		_ = w.Write("flock drift: "+r.Detail, events.LevelNotice, r) // the plan is on stdout too
	}
}

// driftRecords are the records of recordDrift. Pure.
func driftRecords(p plan.Plan, applyErr error) []events.Record {
	byAgent := map[int][]string{}
	for _, c := range p.Changes {
		a := agentOfTarget(c.Target)
		byAgent[a] = append(byAgent[a], fmt.Sprintf("%s %s (%s)", c.Kind, c.Target, c.Why))
	}
	ids := make([]int, 0, len(byAgent))
	for id := range byAgent {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	kind, verb := events.DriftRepaired, "repaired"
	if applyErr != nil {
		kind, verb = events.DriftFound, "not repaired ("+strings.ReplaceAll(applyErr.Error(), "\n", " ")+")"
	}
	var out []events.Record
	for i, id := range ids {
		if i == maxDriftRecords-1 && len(ids) > maxDriftRecords {
			out = append(out, events.Record{Kind: kind, Detail: fmt.Sprintf("%s: and %d more agents' drift", verb, len(ids)-i)})
			break
		}
		out = append(out, events.Record{Kind: kind, Agent: id, Detail: verb + ": " + strings.Join(byAgent[id], "; ")})
	}
	return out
}

// agentTarget finds the agent a change's target belongs to: its unit, its
// user or identity, its directory or log.
var agentTarget = regexp.MustCompile(`(?:flock-agent@|^flock-|/agents/|/logs/|/flock-)(\d+)(?:\.service|\.nk|\.log|/|$)`)

// agentOfTarget is the agent of a change's target (0: the flock's own).
func agentOfTarget(target string) int {
	m := agentTarget.FindStringSubmatch(target)
	if m == nil {
		return 0
	}
	id, _ := strconv.Atoi(m[1])
	return id
}
