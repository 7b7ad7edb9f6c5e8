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
)

// WriteSpec prints what f gives each agent (only the agent whose id is
// agent, unless ""): its unit as planned, its bus grants, its names and
// model APIs, and the walls its level cannot close on kernel k. It reads
// no host: what `flockctl explain -f FILE` prints.
func WriteSpec(out io.Writer, f *spec.Flock, agent string, k Kernel) {
	host := sandbox.Host{IPCScopes: k.IPCScopes}
	// The spec alone: no host of it is this one, so every agent's unit
	// is the one its own host gives it (Views).
	for _, v := range plan.Build(f, plan.Site{}, units.Options{}).Views() {
		a, u, p := v.Agent, v.Unit, v.Bus
		if agent != "" && agent != strconv.Itoa(a.ID) {
			continue
		}
		fmt.Fprintf(out, "# %s: user %s (uid %d), role %s, level %s: %s\n",
			u.Name, spec.UserName(a.ID), v.UID, a.Role, a.Level, a.Level.Label())
		if h, ok := f.HostNamed(a.Host); ok && f.Clustered() {
			fmt.Fprintf(out, "# host: %s (%s): it runs there alone; every host's bus knows its key and grants it the same subjects\n", h.Name, h.Address)
		}
		if a.JIT && a.Level.DeniesWX(false) {
			fmt.Fprintln(out, "# jit: true: no W^X (MemoryDenyWriteExecute=no, and flock-agent's filter allows it), this wall alone: the agent may map memory writable and then executable,")
			fmt.Fprintln(out, "#   as its JIT must, so code written into such memory can run. systemd-analyze security weighs it 0.1")
			fmt.Fprintln(out, "#   (a level-process unit still rates 1.3 OK, measured); every other wall stays.")
		}
		if d, ok := sandbox.Lookup(a.Level); ok {
			for _, g := range d.Gaps(host) {
				fmt.Fprintf(out, "# OPEN at level %s on this host: %s: %s\n", a.Level, g.Wall, g.Why)
			}
		}
		fmt.Fprintln(out, units.Render(u))
		fmt.Fprintf(out, "# bus: nats user %s, nkey %s (its own, 0400, bound read-only at %s in its unit alone)\n", p.Name, spec.CredPath(p.Name), units.CredentialPath)
		fmt.Fprintf(out, "#   publish:   %s\n#   subscribe: %s\n", strings.Join(p.Publish, " "), strings.Join(p.Subscribe, " "))
		if p.ResponseTTL > 0 {
			fmt.Fprintf(out, "#   answers requests it received for up to %s\n", p.ResponseTTL)
		}
		if _, names := SplitEgress(a.Egress); len(names) > 0 {
			fmt.Fprintln(out, NamesLine(names, spec.DefaultProxyListen))
		}
		for _, l := range ModelLines(Models(f, a, spec.DefaultProxyListen)) {
			fmt.Fprintln(out, l)
		}
		if l := BudgetLine(Budgets(f, a)); l != "" {
			fmt.Fprintln(out, l)
		}
		if l := TaskBudgetLine(&a.TaskBudget); l != "" {
			fmt.Fprintln(out, l)
		}
		fmt.Fprintln(out)
	}
}
