package status

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/wire"
)

// WriteTasks is the tasks table; placed (a flock on several hosts) adds
// the HOST column.
func WriteTasks(w io.Writer, entries []operator.TaskEntry, now time.Time, placed *Placement) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no tasks: none queued, no results or dead letters kept")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if placed != nil {
		fmt.Fprintln(tw, "STATE\tTASK\tSUBJECT\tAGENT\tHOLDER\tHOST\tAGE\tCOST\tOUTCOME")
	} else {
		fmt.Fprintln(tw, "STATE\tTASK\tSUBJECT\tAGENT\tHOLDER\tAGE\tCOST\tOUTCOME")
	}
	for _, e := range entries {
		agent := "-"
		if e.Agent > 0 {
			agent = strconv.Itoa(e.Agent)
		} else if e.State == operator.Done {
			agent = "bus"
		}
		holder := "-"
		if e.Holder > 0 {
			holder = strconv.Itoa(e.Holder)
		}
		if placed != nil {
			holder += "\t" + cmp.Or(taskHost(e, placed), "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.State, e.ID, e.Subject, agent, holder, now.Sub(e.Time).Round(time.Second), taskCost(e.Spend), outcome(e))
	}
	tw.Flush()
}

// WriteTasksJSON is the tasks as one JSON document: the entries, each with
// its host on several hosts (placed).
func WriteTasksJSON(w io.Writer, entries []operator.TaskEntry, placed *Placement) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if placed != nil {
		return enc.Encode(withHosts(entries, placed))
	}
	if entries == nil {
		entries = []operator.TaskEntry{}
	}
	return enc.Encode(entries)
}

// taskCost is a task's spend, short ("41.2K tokens, $0.38"), marked when
// its budget stopped it; "-" when not known (no result spend, or its
// proxy did not say).
func taskCost(s *wire.TaskSpend) string {
	if s == nil {
		return "-"
	}
	if s.OutOfBudget {
		return spent(s.Tokens.Total(), s.Cost) + ", out of budget"
	}
	return spent(s.Tokens.Total(), s.Cost)
}

// outcome says in words how a task ended, or what holds it.
func outcome(e operator.TaskEntry) string {
	switch {
	case e.Note != "":
		return e.Note
	case e.State == operator.Dead:
		return fmt.Sprintf("after %d deliveries", e.Deliveries)
	case e.OK != nil && *e.OK:
		return "ok"
	case e.OK != nil:
		return "failed: " + e.Error
	}
	return "-"
}

// taskRow is a task in JSON on several hosts: the entry and its host.
type taskRow struct {
	operator.TaskEntry
	Host string `json:"host,omitempty"`
}

// withHosts is entries with the host of each one's agent.
func withHosts(entries []operator.TaskEntry, placed *Placement) []taskRow {
	out := make([]taskRow, 0, len(entries))
	for _, e := range entries {
		out = append(out, taskRow{TaskEntry: e, Host: taskHost(e, placed)})
	}
	return out
}

// taskHost is the host of the agent holding the task, else of the one it
// is addressed to or that stored its result; "" for none (pending, or
// stored by the bus).
func taskHost(e operator.TaskEntry, placed *Placement) string {
	switch {
	case e.Holder > 0:
		return placed.Host(e.Holder)
	case e.Agent > 0:
		return placed.Host(e.Agent)
	}
	return ""
}

// WriteSilent names the hosts whose desks did not say which tasks their
// workers hold: those tasks show no holder.
func WriteSilent(w io.Writer, hosts []string, said map[string]wire.HostUnits, askErr error) {
	for _, h := range hosts {
		if _, ok := said[h]; ok {
			continue
		}
		why := "did not answer"
		if askErr != nil {
			why = "could not be asked: " + askErr.Error()
		}
		fmt.Fprintf(w, "note: host %s %s: the tasks its workers hold show no holder\n", h, why)
	}
}
