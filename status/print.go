package status

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// printTable is the status table; withHost adds the HOST column (a flock
// on several hosts).
func printTable(w io.Writer, rows []Agent, withHost bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	id := func(r Agent) string { return strconv.Itoa(r.ID) }
	head := "ID"
	if withHost {
		id = func(r Agent) string { return strconv.Itoa(r.ID) + "\t" + r.Host }
		head = "ID\tHOST"
	}
	fmt.Fprintln(tw, head+"\tUSER\tUID\tUNIT\tSTATE\tRESTARTS\tROLE\tLEVEL\tISOLATION\tBUS\tHEARTBEAT\tVIOLATIONS\tDRIFT")
	for _, r := range rows {
		drift, beat, state := r.Drift, "-", r.stateText()
		if drift == "" {
			drift = "-"
		}
		if r.HeartbeatAgeS != nil {
			beat = (time.Duration(*r.HeartbeatAgeS * float64(time.Second))).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n",
			id(r), r.User, r.UID, r.Unit, state, r.Restarts, r.Role, r.Level, r.Label, r.Bus, beat, r.Violations, drift)
	}
	tw.Flush()
}

// printViolations names, below the table, the agents with violations and
// their kinds: "violations: agent 1: 3 publish, 1 subscribe".
func printViolations(w io.Writer, rows []Agent) {
	for _, r := range rows {
		if r.Violations == 0 {
			continue
		}
		var parts []string
		for _, k := range append(slices.Clone(wire.ViolationKinds), otherKinds(r.ViolationsByKind)...) {
			if n := r.ViolationsByKind[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, k))
			}
		}
		fmt.Fprintf(w, "violations: agent %d: %s\n", r.ID, strings.Join(parts, ", "))
	}
}

// printProxyDown names the agents that cannot reach their egress names
// because flock-proxy.service is not running.
func printProxyDown(w io.Writer, rows []Agent) {
	var ids []string
	state := ""
	for _, r := range rows {
		if r.Proxy != "" && r.Proxy != "active" {
			ids, state = append(ids, strconv.Itoa(r.ID)), r.Proxy
		}
	}
	if len(ids) > 0 {
		fmt.Fprintf(w, "note: %s is %s: agents %s cannot reach the names in their egress or their model APIs (journalctl -u %s; flockctl provision starts it)\n",
			units.ProxyUnit, state, strings.Join(ids, ", "), units.ProxyUnit)
	}
}

// printRefused is a line per agent whose packets the firewall denied.
func printRefused(w io.Writer, rows []Agent) {
	for _, r := range rows {
		if r.RefusedPackets == 0 {
			continue
		}
		fmt.Fprintf(w, "refused: agent %d: %d packets denied by the firewall, %d logged (%d over its log limit)\n",
			r.ID, r.RefusedPackets, r.RefusedLogged, r.RefusedPackets-min(r.RefusedLogged, r.RefusedPackets))
	}
}

// otherKinds is the kinds in m that wire.ViolationKinds lacks (a newer
// bus's), sorted.
func otherKinds(m map[string]uint64) []string {
	var out []string
	for k := range m {
		if !slices.Contains(wire.ViolationKinds, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// WriteDiagnoses says, below the table (and below an agent's logs),
// which agents keep dying and why.
func WriteDiagnoses(w io.Writer, rows []Agent) {
	for _, r := range rows {
		switch d := r.Diagnosis; {
		case d != nil:
			fmt.Fprintf(w, "agent %d keeps dying (%d restarts, last %s). Likely wall: %s: %s.\n  fix: %s\n",
				r.ID, r.Restarts, r.LastExit, d.Wall, d.Why, d.Fix)
		case r.Restarts > 0 && r.LastExit != "" && r.LastExit != "exited 0":
			on := ""
			if r.remote {
				on = " on host " + r.Host // its journal is there
			}
			fmt.Fprintf(w, "agent %d keeps dying (%d restarts, last %s); no wall explains it: flockctl logs %d%s\n",
				r.ID, r.Restarts, r.LastExit, r.ID, on)
		}
	}
}

// printSync says when the running bus may lose acknowledged tasks to a
// power cut: it syncs at an interval, not always.
func printSync(w io.Writer, st *wire.BusStatus) {
	switch {
	case st == nil || st.Sync == bus.SyncName(spec.SyncAlways):
	case st.Sync == "":
		fmt.Fprintln(w, "note: the bus syncs every 2m (it started before bus.sync): a power cut loses what it stored since; flockctl provision restarts it to sync always")
	default:
		fmt.Fprintf(w, "note: the bus syncs every %s (bus.sync): a power cut loses what it stored in the last %s\n", st.Sync, st.Sync)
	}
}

// printStore says what the bus found unproven in its store at its start
// and what it put back.
func printStore(w io.Writer, st *wire.BusStatus) {
	if st == nil {
		return
	}
	for _, p := range st.Store {
		where := p.Stream
		if p.File != "" {
			where += ", " + p.File
		}
		fmt.Fprintf(w, "store: %s: %s", where, p.What)
		if p.PutBack > 0 {
			fmt.Fprintf(w, "; %d messages that proved themselves put back", p.PutBack)
		}
		if p.Aside != "" {
			fmt.Fprintf(w, "; kept in %s", p.Aside)
		}
		fmt.Fprintln(w, " (flockctl store check)")
	}
}
