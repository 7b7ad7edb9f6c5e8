package explain

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// Planned is what a spec gives one agent, read from no host: what
// WriteSpec prints of it, and `flockctl explain -f FILE --output json`
// (a list of them). Its fields are a stable contract (docs/security.md):
// new fields may be added, none renamed; those it shares with Report mean
// the same.
type Planned struct {
	Agent int    `json:"agent"`
	Host  *Host  `json:"host,omitempty"` // where it runs in a flock on several hosts
	User  string `json:"user"`
	UID   uint32 `json:"uid"`
	Role  string `json:"role"`
	Level string `json:"level"`
	Label string `json:"label"`
	// JIT: its unit lets memory be mapped writable then executable, as
	// its JIT must (jit: true), the one wall its level drops for it.
	JIT        bool             `json:"jit"`
	Egress     []string         `json:"egress"`
	Names      []string         `json:"names"`
	Proxy      string           `json:"proxy,omitempty"`
	Models     []Model          `json:"models"`
	Secrets    []Secret         `json:"secrets"`
	Budgets    []Budget         `json:"budgets,omitempty"`
	TaskBudget *wire.TaskBudget `json:"task_budget,omitempty"`
	Limits     Limits           `json:"limits"`
	// Open are the walls its level cannot close on this host's kernel.
	Open []sandbox.Gap `json:"open"`
	Unit PlannedUnit   `json:"unit"`
	Bus  Grants        `json:"bus"`

	unit units.Unit // as WriteSpec renders it
}

// PlannedUnit is an agent's unit as the spec plans it.
type PlannedUnit struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Properties are each property flock sets, its value as the text
	// form prints it; a name may come twice (systemd merges them).
	Properties []Setting `json:"properties"`
}

// Setting is one planned unit property.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Grants are what the bus lets an agent publish and subscribe to.
type Grants struct {
	User string `json:"user"` // its nats user
	Seed string `json:"seed"` // its nkey seed on its host (its own, 0400)
	// Bound is where its unit alone binds the seed, read-only.
	Bound     string   `json:"bound"`
	Publish   []string `json:"publish"`
	Subscribe []string `json:"subscribe"`
	// ResponseTTL is how long it may answer a request it received, as
	// Go prints a duration; "" when not at all.
	ResponseTTL string `json:"response_ttl,omitempty"`
}

// Spec is what f gives each agent (only the agent whose id is agent,
// unless ""), in spec order, with the walls its level cannot close on
// kernel k. It reads no host.
func Spec(f *spec.Flock, agent string, k Kernel) []Planned {
	host := sandbox.Host{IPCScopes: k.IPCScopes}
	out := []Planned{}
	// The spec alone: no host of it is this one, so every agent's unit
	// is the one its own host gives it (Views).
	for _, v := range plan.Build(f, plan.Site{}, units.Options{}).Views() {
		a, u, b := v.Agent, v.Unit, v.Bus
		if agent != "" && agent != strconv.Itoa(a.ID) {
			continue
		}
		p := Planned{Agent: a.ID, User: spec.UserName(a.ID), UID: v.UID, Role: string(a.Role), Level: string(a.Level),
			Label: a.Level.Label(), JIT: a.JIT && a.Level.DeniesWX(false),
			Models: Models(f, a, spec.DefaultProxyListen), Secrets: Secrets(f, a), Budgets: Budgets(f, a),
			Limits: Limits{a.Limits.MemoryBytes, a.Limits.CPUPercent, a.Limits.Tasks}, Open: []sandbox.Gap{},
			Unit: PlannedUnit{Name: u.Name, Description: u.Description, Properties: []Setting{}},
			Bus:  Grants{User: b.Name, Seed: spec.CredPath(b.Name), Bound: units.CredentialPath, Publish: b.Publish, Subscribe: b.Subscribe},
			unit: u}
		p.Egress, p.Names = SplitEgress(a.Egress)
		if len(p.Names) > 0 || len(p.Models) > 0 {
			p.Proxy = spec.DefaultProxyListen
		}
		if a.TaskBudget.Any() {
			tb := a.TaskBudget
			p.TaskBudget = &tb
		}
		if h, ok := f.HostNamed(a.Host); ok && f.Clustered() {
			p.Host = &Host{Name: h.Name, Address: h.Address.String()}
		}
		if d, ok := sandbox.Lookup(a.Level); ok {
			p.Open = append(p.Open, d.Gaps(host)...)
		}
		for _, prop := range u.Properties {
			p.Unit.Properties = append(p.Unit.Properties, Setting{Name: prop.Name, Value: units.ValueText(prop.Value)})
		}
		if b.ResponseTTL > 0 {
			p.Bus.ResponseTTL = b.ResponseTTL.String()
		}
		out = append(out, p)
	}
	return out
}

// WriteSpec prints what f gives each agent (Spec): its unit as planned,
// its bus grants, its names and model APIs, and the walls its level
// cannot close on kernel k. What `flockctl explain -f FILE` prints.
func WriteSpec(out io.Writer, f *spec.Flock, agent string, k Kernel) {
	for _, p := range Spec(f, agent, k) {
		fmt.Fprintf(out, "# %s: user %s (uid %d), role %s, level %s: %s\n",
			p.Unit.Name, p.User, p.UID, p.Role, p.Level, p.Label)
		if p.Host != nil {
			fmt.Fprintf(out, "# host: %s (%s): it runs there alone; every host's bus knows its key and grants it the same subjects\n", p.Host.Name, p.Host.Address)
		}
		if p.JIT {
			fmt.Fprintln(out, "# jit: true: no W^X (MemoryDenyWriteExecute=no, and flock-agent's filter allows it), this wall alone: the agent may map memory writable and then executable,")
			fmt.Fprintln(out, "#   as its JIT must, so code written into such memory can run. systemd-analyze security weighs it 0.1")
			fmt.Fprintln(out, "#   (a level-process unit still rates 1.3 OK, measured); every other wall stays.")
		}
		for _, g := range p.Open {
			fmt.Fprintf(out, "# OPEN at level %s on this host: %s: %s\n", p.Level, g.Wall, g.Why)
		}
		fmt.Fprintln(out, units.Render(p.unit))
		fmt.Fprintf(out, "# bus: nats user %s, nkey %s (its own, 0400, bound read-only at %s in its unit alone)\n", p.Bus.User, p.Bus.Seed, p.Bus.Bound)
		fmt.Fprintf(out, "#   publish:   %s\n#   subscribe: %s\n", strings.Join(p.Bus.Publish, " "), strings.Join(p.Bus.Subscribe, " "))
		if p.Bus.ResponseTTL != "" {
			fmt.Fprintf(out, "#   answers requests it received for up to %s\n", p.Bus.ResponseTTL)
		}
		if len(p.Names) > 0 {
			fmt.Fprintln(out, NamesLine(p.Names, p.Proxy))
		}
		for _, l := range append(ModelLines(p.Models), SecretLines(p.Secrets)...) {
			fmt.Fprintln(out, l)
		}
		if l := BudgetLine(p.Budgets); l != "" {
			fmt.Fprintln(out, l)
		}
		if l := TaskBudgetLine(p.TaskBudget); l != "" {
			fmt.Fprintln(out, l)
		}
		fmt.Fprintln(out)
	}
}
