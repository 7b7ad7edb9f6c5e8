package audit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText is the report for people: a table per agent, then its drift,
// exposure and known gaps, then the verdict.
func (r Report) WriteText(w io.Writer) {
	for _, a := range r.Agents {
		peer := fmt.Sprintf("agent %d as the peer", a.Peer)
		if a.Peer == 0 {
			peer = "no peer (a flock of one)"
		}
		fmt.Fprintf(w, "agent %d (level %s), %s, in %s (%.0f ms)\n", a.Agent, a.Level, peer, a.Unit, a.Elapsed)
		if a.Error != "" {
			fmt.Fprintf(w, "  NOT AUDITED: %s\n", a.Error)
		}
		if len(a.AsLive) > 0 {
			fmt.Fprintf(w, "  probed with the walls in force, not the planned: %s\n", strings.Join(a.AsLive, " "))
		}
		for _, u := range a.PeerUnopened {
			fmt.Fprintf(w, "  the peer could not open (its probe aims at the host's): %s\n", u)
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		if len(a.Probes) > 0 {
			fmt.Fprintln(tw, "  PROBE\tCATEGORY\tRESULT\tDETAIL")
		}
		for _, o := range a.Probes {
			res, detail := string(o.Result), o.Detail
			switch o.Result {
			case Open:
				res = "open (known: " + o.Known + ")"
			case Unproven:
				detail = o.Detail + "; as root too: control " + o.Control
			case Absent:
				detail = "not on this host: control " + o.Control
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Probe, o.Category, res, clip(detail, 160))
		}
		tw.Flush()
		if len(a.Drift) == 0 {
			fmt.Fprintln(w, "  drift: none")
		}
		for _, d := range a.Drift {
			fmt.Fprintf(w, "  DRIFT %s %s: want %q, have %q\n", d.Kind, d.What, d.Want, d.Have)
		}
		switch {
		case a.Exposure.Score != nil:
			fmt.Fprintf(w, "  exposure: %.1f %s\n", *a.Exposure.Score, a.Exposure.Rating)
		default:
			fmt.Fprintf(w, "  exposure: unavailable (%s)\n", a.Exposure.Unavailable)
		}
		for _, g := range a.Open {
			fmt.Fprintf(w, "  open at this level on this kernel: %s\n", g.Wall)
		}
		for _, u := range a.Unread {
			fmt.Fprintf(w, "  unread: %s\n", u)
		}
		fmt.Fprintln(w)
	}
	verdict := "clean"
	if r.Failing() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "audit %s: %d agents, %d probes, %d escaped, %d unproven, %d drift, %d not audited (%.1f s)\n",
		verdict, len(r.Agents), r.Probes, r.Escaped, r.Unproven, r.Drift, r.Errors, r.Elapsed/1000)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
