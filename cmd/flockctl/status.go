package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/bus/wire"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// agentStatus is one row of `flockctl status`; its JSON keys are a contract.
type agentStatus struct {
	ID int `json:"id"`
	// Host is where the agent runs, in a flock on several hosts only.
	Host     string `json:"host,omitempty"`
	User     string `json:"user"`
	UID      uint32 `json:"uid"`
	Unit     string `json:"unit"`
	State    string `json:"state"` // systemd's ActiveState; "absent" if not loaded; "unknown" if its host did not say
	SubState string `json:"sub_state"`
	// StateNote is why the state is unknown ("host b did not answer").
	StateNote string `json:"state_note,omitempty"`
	Role      string `json:"role"`
	Level     string `json:"level"`
	Label     string `json:"label"`
	// IPCScoped: the kernel keeps the agent's abstract UNIX sockets and
	// signals to itself (Landlock); false means they are shared host-wide.
	IPCScoped bool `json:"ipc_scoped"`
	// Bus is "connected", "disconnected" or "unknown" (the bus did not
	// answer); the rest is what the bus saw of the agent since it started.
	Bus           string     `json:"bus"`
	Connections   int        `json:"connections"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	HeartbeatAgeS *float64   `json:"heartbeat_age_s,omitempty"`
	// Violations is every violation the bus counted for the agent (kept
	// across bus restarts), ViolationsByKind the same by wire kind.
	Violations       uint64            `json:"violations"`
	ViolationsByKind map[string]uint64 `json:"violations_by_kind,omitempty"`
	Drift            string            `json:"drift,omitempty"`
	// RefusedPackets is the agent's packets the firewall denied since the
	// table was last written, RefusedLogged how many of them it logged
	// (the rest were over the agent's own log limit).
	RefusedPackets uint64 `json:"refused_packets"`
	RefusedLogged  uint64 `json:"refused_logged"`
	// Restarts and LastExit are systemd's; Diagnosis names the wall that
	// likely keeps the agent dying, and the spec change that lifts it.
	Restarts  uint32           `json:"restarts"`
	LastExit  string           `json:"last_exit,omitempty"`
	Diagnosis *units.Diagnosis `json:"diagnosis,omitempty"`
	// Proxy is flock-proxy.service's ActiveState for an agent with names
	// in its egress or model APIs (it reaches them only through it); ""
	// for the rest.
	Proxy string `json:"proxy,omitempty"`
	// Models is its use of each model API it is granted (or used), as
	// the proxy counted it (usage.go).
	Models []modelUse `json:"models,omitempty"`

	remote bool // runs on another host: its journal is there
}

func newStatus() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "status [-f FILE] [--output table|json]",
		Short: "Show every agent: its user, unit state and isolation level",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: choose table or json", output)
			}
			f, err := flockFor(file)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// Drift is what provision would change, planned read-only.
			w, err := whereFor(f, "", true)
			if err != nil {
				return err
			}
			pl, err := planFor(ctx, f, w)
			if err != nil {
				return err
			}
			defer pl.close()
			byAgent, flockWide := driftOf(f, pl.plan)
			// On several hosts the others' buses are asked for their
			// agents' units while this host's are read.
			placed := placementOf(f, pl.have.BusConfig)
			var hostsSaid func() hostsAnswers
			if placed != nil {
				hostsSaid = placed.askHosts(ctx)
			}
			scoped := agent.IPCScopesSupported()
			// The bus's answer to the observation above; asked again only
			// when flock.service was not active then (it may be starting).
			onBus, busErr := pl.have.BusStatus, pl.have.BusErr
			if onBus == nil && busErr == nil {
				onBus, busErr = pl.host.Bus.Status(ctx)
			}
			refused, fwErr := pl.host.Firewall.Refused(ctx)
			now := time.Now()
			sts := make([]units.Status, len(f.Agents))
			for i := range f.Agents {
				// Another host's agent has no unit here: no state.
				sts[i] = pl.have.Units[spec.UnitName(f.Agents[i].ID)]
			}
			sts = withExits(ctx, pl.host.Units, sts)
			var said hostsAnswers
			if hostsSaid != nil {
				said = hostsSaid()
			}
			rows := make([]agentStatus, 0, len(f.Agents))
			for i, a := range f.Agents {
				if !placed.local(a.ID) {
					row := remoteRow(f, a, placed.host(a.ID), said, onBus, now)
					row.Drift = strings.Join(byAgent[a.ID], "; ")
					row.IPCScoped = scoped
					rows = append(rows, row)
					continue
				}
				st := sts[i]
				row := statusOf(f, a, st)
				row.Host = placed.host(a.ID)
				row.Diagnosis = diagnose(ctx, a, st)
				row.Drift = strings.Join(byAgent[a.ID], "; ")
				row.IPCScoped = scoped
				row.busFields(onBus, now)
				r := refused[row.UID]
				row.RefusedPackets, row.RefusedLogged = r.Refused, r.Logged
				if proxy.NeedsProxy(a) {
					row.Proxy = pl.have.ProxyService.ActiveState
				}
				row.modelFields(a, onBus, now)
				rows = append(rows, row)
			}
			notes := cmd.OutOrStdout()
			if output == "json" {
				notes = cmd.ErrOrStderr() // stdout stays one JSON document
			}
			defer func() {
				printProxyDown(notes, rows)
				for _, d := range flockWide {
					fmt.Fprintf(notes, "drift: %s (flockctl provision repairs it)\n", d)
				}
			}()
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			printTable(cmd.OutOrStdout(), rows, placed != nil)
			printViolations(cmd.OutOrStdout(), rows)
			printRefused(cmd.OutOrStdout(), rows)
			printDiagnoses(cmd.OutOrStdout(), rows)
			printModels(cmd.OutOrStdout(), rows)
			if busErr != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "note: the bus did not answer: %v\n", busErr)
			}
			if fwErr != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "note: the firewall's refusal counts could not be read: %v\n", fwErr)
			}
			if !scoped {
				fmt.Fprintln(cmd.OutOrStdout(), "note: this kernel has no Landlock IPC scopes (Linux 6.12+): agents can reach each other's abstract UNIX sockets")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "spec to compare against (default: the last provisioned)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func flockFor(file string) (*spec.Flock, error) {
	if file != "" {
		return spec.Load(file)
	}
	return appliedFlock()
}

func statusOf(f *spec.Flock, a spec.Agent, st units.Status) agentStatus {
	row := agentStatus{
		ID: a.ID, User: spec.UserName(a.ID), UID: f.UID(a.ID), Unit: spec.UnitName(a.ID),
		State: st.ActiveState, SubState: st.SubState,
		Role: string(a.Role), Level: string(a.Level), Label: a.Level.Label(),
		Restarts: st.Restarts,
	}
	if st.LastExit.Code != "" {
		row.LastExit = st.LastExit.String()
	}
	if st.Name == "" {
		row.State = "absent"
	}
	return row
}

// driftOf sorts a plan's changes by the agent they concern; the rest
// (the firewall, the bus, users of agents not in the spec) concern the
// whole flock.
func driftOf(f *spec.Flock, p plan.Plan) (byAgent map[int][]string, flockWide []string) {
	owner := map[string]int{}
	for _, a := range f.Agents {
		owner[spec.UnitName(a.ID)] = a.ID
		owner[spec.UserName(a.ID)] = a.ID
		owner[f.AgentDir(a.ID)] = a.ID
		owner[f.LogPath(a.ID)] = a.ID
	}
	byAgent = map[int][]string{}
	for _, c := range p.Changes {
		if id, ok := owner[c.Target]; ok {
			byAgent[id] = append(byAgent[id], fmt.Sprintf("%s: %s", c.Kind, c.Why))
			continue
		}
		flockWide = append(flockWide, fmt.Sprintf("%s %s: %s", c.Kind, c.Target, c.Why))
	}
	return byAgent, flockWide
}

func (r *agentStatus) busFields(st *wire.BusStatus, now time.Time) {
	if st == nil {
		r.Bus = "unknown"
		return
	}
	seen := st.Agents[r.ID]
	r.Bus, r.Connections = "disconnected", seen.Connections
	r.Violations, r.ViolationsByKind = seen.ViolationsTotal, seen.Violations
	if seen.Connections > 0 {
		r.Bus = "connected"
	}
	if at := seen.HeartbeatAt; at != nil {
		age := now.Sub(*at).Seconds()
		r.LastHeartbeat, r.HeartbeatAgeS = at, &age
	}
}

// printTable is the status table; withHost adds the HOST column (a flock
// on several hosts).
func printTable(w io.Writer, rows []agentStatus, withHost bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	id := func(r agentStatus) string { return strconv.Itoa(r.ID) }
	head := "ID"
	if withHost {
		id = func(r agentStatus) string { return strconv.Itoa(r.ID) + "\t" + r.Host }
		head = "ID\tHOST"
	}
	fmt.Fprintln(tw, head+"\tUSER\tUID\tUNIT\tSTATE\tRESTARTS\tROLE\tLEVEL\tISOLATION\tBUS\tHEARTBEAT\tVIOLATIONS\tDRIFT")
	for _, r := range rows {
		drift, beat := r.Drift, "-"
		state := r.State + "/" + r.SubState
		if r.StateNote != "" {
			state = r.State + " (" + r.StateNote + ")"
		}
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
func printViolations(w io.Writer, rows []agentStatus) {
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
func printProxyDown(w io.Writer, rows []agentStatus) {
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
func printRefused(w io.Writer, rows []agentStatus) {
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

// printDiagnoses says, below the table, which agents keep dying and why.
func printDiagnoses(w io.Writer, rows []agentStatus) {
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

// withExit adds how often a loaded, not stopped unit restarted and how it
// last ended. A stopped unit is not asked: reading its properties while
// systemd collects it would load it again.
func withExit(ctx context.Context, m units.Manager, st units.Status) units.Status {
	if st.Name != "" && st.ActiveState != "inactive" {
		st.Restarts, st.LastExit = m.Exit(ctx, st.Name)
	}
	return st
}

// exitReaders bounds the property reads in flight: systemd answers them
// one by one, and pipelining hides the D-Bus round trips (a flock of a
// thousand: three reads each).
const exitReaders = 16

// withExits is withExit of every status, read in parallel.
func withExits(ctx context.Context, m units.Manager, sts []units.Status) []units.Status {
	out := make([]units.Status, len(sts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, exitReaders)
	for i, st := range sts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = withExit(ctx, m, st)
		}()
	}
	wg.Wait()
	return out
}

// diagnose names the wall that likely keeps agent a dying, reading the
// tail of its journal only when systemd says it is in a restart loop.
func diagnose(ctx context.Context, a spec.Agent, st units.Status) *units.Diagnosis {
	if !units.Looping(st) {
		return nil
	}
	out, _ := exec.CommandContext(ctx, "journalctl", "--no-pager", "-o", "cat", "-n", "50", "-u", st.Name).Output()
	if d, ok := units.Diagnose(a, st, string(out)); ok {
		return &d
	}
	return nil
}
