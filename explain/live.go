package explain

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"

	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// Sources are the host's boundaries explain reads; fakes in tests.
type Sources struct {
	Units    units.Manager
	Firewall netpolicy.Firewall
	Users    users.Host
	// Bus asks the running bus for agent id's permissions.
	Bus func(ctx context.Context, id int) (wire.Permissions, error)
	// Kernel and Exposure read what the kernel offers and systemd's score.
	Kernel   func() Kernel
	Exposure func(ctx context.Context, unit string) Exposure
}

// ErrUnknownAgent means the id is not in the provisioned flock.
var ErrUnknownAgent = errors.New("no such agent in the provisioned flock")

// Live reads agent id's walls from the host and compares them with d, the
// plan of the provisioned flock. A source that cannot be read is named in
// Unread; only an id d does not have is an error.
func Live(ctx context.Context, s Sources, d plan.Desired, id int) (Report, error) {
	var v *plan.AgentView
	ids := []string{}
	for _, x := range d.Views() {
		ids = append(ids, strconv.Itoa(x.Agent.ID))
		if x.Agent.ID == id {
			v = &x
		}
	}
	if v == nil {
		return Report{}, fmt.Errorf("agent %d: %w (its agents: %v); see flockctl status, or explain a spec without root: flockctl explain -f FILE %d",
			id, ErrUnknownAgent, ids, id)
	}
	a := v.Agent
	r := Report{Agent: a.ID, User: spec.UserName(a.ID), UID: v.UID, Role: string(a.Role), Level: string(a.Level),
		Label: a.Level.Label(), Egress: []string{}, Limits: Limits{a.Limits.MemoryBytes, a.Limits.CPUPercent, a.Limits.Tasks},
		Firewall: []string{}, Paths: []Path{}, Drift: []Drift{}, Unread: []string{}}
	r.Egress, r.Names = SplitEgress(a.Egress)
	r.Models = Models(d.Flock, a, spec.DefaultProxyListen)
	r.Secrets = Secrets(d.Flock, a)
	r.Budgets = Budgets(d.Flock, a)
	if a.TaskBudget.Any() {
		b := a.TaskBudget
		r.TaskBudget = &b
	}
	if h, ok := d.Flock.HostNamed(a.Host); ok && d.Flock.Clustered() {
		r.Host = &Host{Name: h.Name, Address: h.Address.String()}
	}
	unread := func(what string, err error) { r.Unread = append(r.Unread, what+": "+err.Error()) }
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	r.Unit = Unit{Name: v.Unit.Name}
	if props, err := s.Units.Properties(ctx, v.Unit.Name); errors.Is(err, units.ErrNotLoaded) {
		r.drift("unit", v.Unit.Name, "loaded, active", "not loaded")
	} else if err != nil {
		unread("unit "+v.Unit.Name, err)
	} else {
		r.unit(v.Unit, props)
		r.maskPlaceholders(d.Flock, a, undrawn(v.Unit))
	}

	if rules, err := s.Firewall.RulesFor(ctx, v.UID); err != nil {
		unread("table inet "+netpolicy.Table, err)
	} else {
		r.Firewall = append(r.Firewall, rules...)
		planned, err := netpolicy.PlannedRulesFor(netpolicy.ForFlock(d.Flock), v.UID)
		if err != nil {
			unread("the planned rules", err)
		}
		r.rules(planned, rules)
	}

	for _, p := range agentPaths(d.Flock, a.ID) {
		have, ok, err := s.Users.PathState(ctx, p.Path)
		if err != nil {
			unread(p.Path, err)
			continue
		}
		r.path(p, have, ok)
	}

	if perms, err := s.Bus(ctx, a.ID); err != nil {
		unread("the bus's permissions", err)
	} else {
		r.Bus = &perms
		r.bus(v.Bus, perms)
	}

	if len(r.Names) > 0 || len(r.Models) > 0 {
		r.Proxy = spec.DefaultProxyListen
		// Its names and model APIs reach nothing while the proxy is down.
		if st, err := s.Units.Service(ctx, units.ProxyUnit); err != nil {
			unread(units.ProxyUnit, err)
		} else if st.ActiveState != "active" {
			r.drift("proxy", units.ProxyUnit, "active (the agent has "+needs(len(r.Names) > 0, len(r.Models) > 0)+")", orNone(st.ActiveState))
		}
	}

	r.Kernel = s.Kernel()
	if d, ok := sandbox.Lookup(a.Level); ok {
		r.Kernel.Open = d.Gaps(sandbox.Host{IPCScopes: r.Kernel.IPCScopes})
	}
	r.Exposure = s.Exposure(ctx, v.Unit.Name)
	return r, nil
}

// SplitEgress is an agent's egress as the spec writes it, split as the
// spec splits it (spec.SplitEgress): its address allowances (the
// firewall's) and its names (the proxy's).
func SplitEgress(eg []spec.Egress) (addrs, names []string) {
	a, n := spec.SplitEgress(eg)
	return egressStrings(a), egressStrings(n)
}

func egressStrings(eg []spec.Egress) []string {
	out := make([]string, len(eg))
	for i, e := range eg {
		out[i] = e.String()
	}
	return out
}

func (r *Report) drift(kind, what, want, have string) {
	r.Drift = append(r.Drift, Drift{Kind: kind, What: what, Want: want, Have: have})
}

// agentPaths are the paths of users.Paths and users.Seeds that are agent
// id's or that it shares: its directory, its log, its seed, common/ and
// the parents that keep others out of theirs.
func agentPaths(f *spec.Flock, id int) []users.Path {
	mine := []string{f.AgentsDir(), f.AgentDir(id), f.LogsDir(), f.LogPath(id), f.CommonDir(), spec.CredPath(spec.UserName(id))}
	var out []users.Path
	for _, p := range append(users.Paths(f), users.Seeds(f)...) {
		if slices.Contains(mine, p.Path) {
			out = append(out, p)
		}
	}
	return out
}

// ownerName is user:group of uid and gid, by name where the host has one.
func ownerName(uid, gid uint32) string {
	u, g := strconv.Itoa(int(uid)), strconv.Itoa(int(gid))
	if x, err := user.LookupId(u); err == nil {
		u = x.Username
	}
	if x, err := user.LookupGroupId(g); err == nil {
		g = x.Name
	}
	return u + ":" + g
}
