package status

import "fmt"

// Problem says why agent row r is not well, "" when it is: well is its
// unit active, its bus connected, no drift, and its proxy (if it needs
// one) active, each as the row and the table have it. flockctl status
// exits 3 when a row has a problem (docs/operating.md, "Exit codes").
func (r Agent) Problem() string {
	switch {
	case r.State != "active":
		return fmt.Sprintf("agent %d is %s", r.ID, r.stateText())
	case r.Bus != "connected":
		return fmt.Sprintf("agent %d is %s on the bus", r.ID, r.Bus)
	case r.Drift != "":
		return fmt.Sprintf("agent %d drifted: %s", r.ID, r.Drift)
	case r.Proxy != "" && r.Proxy != "active":
		return fmt.Sprintf("agent %d's proxy is %s", r.ID, r.Proxy)
	}
	return ""
}

// Problems are what keeps r from being well: each row's problem, then the
// drift of the whole flock (its firewall, its bus), which every agent
// shares. None: all is well, as far as the rows tell.
func (r Report) Problems() []string {
	var out []string
	for _, row := range r.Rows {
		if p := row.Problem(); p != "" {
			out = append(out, p)
		}
	}
	for _, d := range r.FlockWide {
		out = append(out, "drift: "+d)
	}
	return out
}

// stateText is the row's state as the table's STATE column has it.
func (r Agent) stateText() string {
	if r.StateNote != "" {
		return r.State + " (" + r.StateNote + ")"
	}
	return r.State + "/" + r.SubState
}
