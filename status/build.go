package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// Sources is what status reads: this host's boundaries and what the plan
// observed of them, and the way to the other hosts' buses.
type Sources struct {
	Host plan.Host
	Have plan.Current
	// Drift is what provision would change, planned read-only.
	Drift plan.Plan
	// Connect is the operator's connection to the bus, to ask the other
	// hosts' buses of a multi-host flock.
	Connect func(context.Context) (*nats.Conn, error)
	// ThisHost tells this host of f from this machine's addresses, as
	// provision does ("": cannot tell).
	ThisHost func(f *spec.Flock) string
	// Only are the agents to report (flockctl status ID...), each one of
	// f's; none: every agent.
	Only []int
}

// Read reads what status shows of f: this host's units (with their exits
// and, for a restart loop, the wall its journal names), its bus, its
// firewall's refusals, and on several hosts the other hosts' buses (asked
// while this host's are read).
func Read(ctx context.Context, f *spec.Flock, src Sources) Report {
	placed := PlacementOf(f, src.Have.BusConfig, src.ThisHost)
	var hostsSaid func() HostsAnswers
	if placed != nil {
		hostsSaid = placed.AskHosts(ctx, src.Connect)
	}
	o := Observed{Flock: f, Drift: src.Drift, Placed: placed, Only: src.Only, IPCScoped: agent.IPCScopesSupported(),
		Proxy:    src.Have.ProxyService.ActiveState,
		Diagnose: func(a spec.Agent, st units.Status) *units.Diagnosis { return Diagnose(ctx, a, st) }}
	// The bus's answer to the plan's observation; asked again only when
	// flock.service was not active then (it may be starting).
	o.Bus, o.BusErr = src.Have.BusStatus, src.Have.BusErr
	if o.Bus == nil && o.BusErr == nil {
		o.Bus, o.BusErr = src.Host.Bus.Status(ctx)
	}
	o.Refused, o.FirewallErr = src.Host.Firewall.Refused(ctx)
	o.Now = time.Now()
	sts := make([]units.Status, len(f.Agents))
	for i, a := range f.Agents {
		// Another host's agent has no unit here, and an agent not asked
		// about is not read: no state.
		if o.asked(a.ID) {
			sts[i] = src.Have.Units[spec.UnitName(a.ID)]
		}
	}
	o.Units = WithExits(ctx, src.Host.Units, sts)
	if hostsSaid != nil {
		o.Hosts = hostsSaid()
	}
	return Build(o)
}

// Observed is everything a status report is made of, read (Read) or
// given (tests).
type Observed struct {
	Flock *spec.Flock
	Drift plan.Plan
	// Units are this host's agents' units with their exits, by index of
	// Flock.Agents (another host's agent: none).
	Units       []units.Status
	Bus         *wire.BusStatus // nil: the bus did not answer (BusErr)
	BusErr      error
	Refused     map[uint32]netpolicy.Refusals
	FirewallErr error
	Proxy       string // flock-proxy.service's ActiveState
	Placed      *Placement
	Only        []int // the agents to report; none: every agent
	Hosts       HostsAnswers
	IPCScoped   bool
	Now         time.Time
	// Diagnose names the wall that keeps a looping agent dying; nil: none.
	Diagnose func(spec.Agent, units.Status) *units.Diagnosis
}

// asked says whether agent id is one to report.
func (o Observed) asked(id int) bool { return len(o.Only) == 0 || slices.Contains(o.Only, id) }

// Report is a status: a row per agent, and what concerns the flock as a
// whole.
type Report struct {
	Rows      []Agent
	FlockWide []string // drift of no one agent
	BusErr    error
	// FirewallErr is why the refusal counts could not be read.
	FirewallErr error
	IPCScoped   bool
	// Bus is what the bus said of itself (nil: it did not answer): how it
	// syncs, what it found unproven in its store and whether its side of
	// a split cluster refuses tasks, told below the table.
	Bus   *wire.BusStatus
	hosts bool // the HOST column
	// budgets are the spec's, for the spend line.
	budgets []BudgetSpend
}

// Build makes the report of o. Pure.
func Build(o Observed) Report {
	f := o.Flock
	byAgent, flockWide := driftOf(f, o.Drift)
	budgets := BudgetsOf(f.Budgets, reports(o.Bus), o.Now)
	rows := make([]Agent, 0, len(f.Agents))
	for i, a := range f.Agents {
		if !o.asked(a.ID) {
			continue
		}
		if !o.Placed.Local(a.ID) {
			row := remoteRow(f, a, o.Placed.Host(a.ID), o.Hosts, o.Bus, o.Now)
			row.Drift = strings.Join(byAgent[a.ID], "; ")
			row.IPCScoped = o.IPCScoped
			rows = append(rows, row)
			continue
		}
		st := o.Units[i]
		row := Of(f, a, st)
		row.Host = o.Placed.Host(a.ID)
		if o.Diagnose != nil {
			row.Diagnosis = o.Diagnose(a, st)
		}
		row.Drift = strings.Join(byAgent[a.ID], "; ")
		row.IPCScoped = o.IPCScoped
		row.busFields(o.Bus, o.Now)
		r := o.Refused[row.UID]
		row.RefusedPackets, row.RefusedLogged = r.Refused, r.Logged
		if a.NeedsProxy() {
			row.Proxy = o.Proxy
		}
		row.modelFields(f, a, o.Bus, budgets, o.Now)
		rows = append(rows, row)
	}
	return Report{Rows: rows, FlockWide: flockWide, BusErr: o.BusErr, FirewallErr: o.FirewallErr,
		IPCScoped: o.IPCScoped, Bus: o.Bus, hosts: o.Placed != nil, budgets: budgets}
}

// Write prints r to out: the table with its notes, or (asJSON) the rows
// as one JSON document, the notes then going to notesJSON so out stays
// that document.
func (r Report) Write(out, notesJSON io.Writer, asJSON bool) error {
	notes := out
	if asJSON {
		notes = notesJSON
	}
	defer func() {
		printSync(notes, r.Bus)
		printStore(notes, r.Bus)
		printProxyDown(notes, r.Rows)
		for _, d := range r.FlockWide {
			fmt.Fprintf(notes, "drift: %s (flockctl provision repairs it)\n", d)
		}
		if r.Bus != nil && r.Bus.NoQuorum != "" {
			fmt.Fprintf(notes, "note: tasks sent on this host are refused: %s\n", r.Bus.NoQuorum)
		}
	}()
	if asJSON {
		if r.BusErr != nil {
			fmt.Fprintf(notes, "note: the bus did not answer: %v\n", r.BusErr)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r.Rows)
	}
	printTable(out, r.Rows, r.hosts)
	printViolations(out, r.Rows)
	printRefused(out, r.Rows)
	WriteDiagnoses(out, r.Rows)
	printModels(out, r.Rows)
	printSecrets(out, r.Rows)
	printSpend(out, r.Rows, r.budgets)
	if r.BusErr != nil {
		fmt.Fprintf(out, "note: the bus did not answer: %v\n", r.BusErr)
	}
	if r.FirewallErr != nil {
		fmt.Fprintf(out, "note: the firewall's refusal counts could not be read: %v\n", r.FirewallErr)
	}
	if !r.IPCScoped {
		fmt.Fprintln(out, "note: this kernel has no Landlock IPC scopes (Linux 6.12+): agents can reach each other's abstract UNIX sockets")
	}
	return nil
}
