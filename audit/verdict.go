package audit

import (
	"strings"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/sandbox"
)

// Result is a probe's verdict.
type Result string

const (
	Blocked  Result = "blocked"  // refused in the unit, worked as root: a wall, proven
	Escaped  Result = "ESCAPED"  // worked in the unit
	Open     Result = "open"     // worked, where the level cannot close it on this kernel (a known gap)
	Unproven Result = "unproven" // refused in the unit, but its control failed too, or it hung in the unit: proves nothing
	Absent   Result = "n/a"      // an optional target this host does not have, or forbids root too
)

// Outcome is one probe's line of the report.
type Outcome struct {
	Probe    string  `json:"probe"`
	Category string  `json:"category"`
	Result   Result  `json:"result"`
	Detail   string  `json:"detail"`  // the error the agent met, or what worked
	Control  string  `json:"control"` // what root met outside every unit
	Known    string  `json:"known,omitempty"`
	Elapsed  float64 `json:"elapsed_ms"`
}

// Judge reads one probe's two results against the level's known gaps.
func Judge(p Probe, got, control probe.Result, gaps []sandbox.Gap) Outcome {
	o := Outcome{Probe: p.Name, Category: p.Category, Elapsed: got.ElapsedMS, Detail: got.Err, Control: control.Detail}
	if !control.OK {
		o.Control = "failed: " + control.Err
	}
	switch {
	case got.OK && reads[p.Req.Op] && strings.TrimSpace(got.Detail) == "":
		o.Result, o.Detail = Blocked, "read nothing (an empty mount point, not the target)"
	case got.OK:
		o.Detail, o.Result = got.Detail, Escaped
		for _, g := range gaps {
			if p.Wall != "" && strings.EqualFold(g.Wall, p.Wall) {
				o.Result, o.Known = Open, g.Why
			}
		}
	case got.TimedOut:
		// Every wall refuses at once: a hang is no wall, and may be an
		// escape too slow to finish.
		o.Result = Unproven
	case !control.OK && p.Optional:
		o.Result = Absent
	case !control.OK:
		o.Result = Unproven
	default:
		o.Result = Blocked
	}
	return o
}

// Failing says whether the outcome fails the audit.
func (o Outcome) Failing() bool { return o.Result == Escaped || o.Result == Unproven }
