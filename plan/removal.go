package plan

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Removal is what a deprovision would take from the host, read from it
// before anything changes: flockctl deprovision prints it and asks, then
// Remove or RemoveAll does it.
type Removal struct {
	// Agents are those whose units, users, bus identities and firewall
	// rules go.
	Agents []int
	// Flock are the flock's own parts that go besides (its firewall
	// table, services, config and credentials), each said in a phrase.
	Flock []string
	// Paths are what purge deletes, those on the host now; kept unless
	// Purge.
	Paths []string
	Purge bool
	// Readers: a purge of everything, on a host with spec.ReadersGroup,
	// which goes if flock made it. Not counted by Empty: a group an
	// operator made stays after every purge.
	Readers bool
}

// Empty says whether the deprovision would change nothing.
func (r Removal) Empty() bool {
	return len(r.Agents) == 0 && len(r.Flock) == 0 && (!r.Purge || len(r.Paths) == 0)
}

// shownPaths bounds the paths String lists: a flock of a thousand has two
// thousand.
const shownPaths = 10

// String is the removal as flockctl deprovision prints it.
func (r Removal) String() string {
	if r.Empty() {
		return "nothing to remove\n"
	}
	var b strings.Builder
	b.WriteString("to remove from this host:\n")
	switch len(r.Agents) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "  agent %d: its unit, user and group, bus identity and firewall rules\n", r.Agents[0])
	default:
		fmt.Fprintf(&b, "  agents %s: their units, users and groups, bus identities and firewall rules\n", spec.IDRanges(r.Agents))
	}
	for _, s := range r.Flock {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	if r.Readers {
		fmt.Fprintf(&b, "  group %s, if flock made it (its members can no longer read the flock)\n", spec.ReadersGroup)
	}
	if len(r.Paths) > 0 {
		verb := "delete"
		if !r.Purge {
			b.WriteString("kept (--purge deletes them):\n")
			verb = "keep"
		}
		for _, p := range r.Paths[:min(len(r.Paths), shownPaths)] {
			fmt.Fprintf(&b, "  %s %s\n", verb, p)
		}
		if n := len(r.Paths) - shownPaths; n > 0 {
			fmt.Fprintf(&b, "  and %d more\n", n)
		}
	}
	return b.String()
}

// ReadRemoval is what Remove(ctx, h, f, ids, purge) would take away: the
// agents of ids that f has, and the firewall table and the proxy when
// none of the rest needs them.
func ReadRemoval(ctx context.Context, h Host, f *spec.Flock, ids []int, purge bool) (Removal, error) {
	r := Removal{Purge: purge}
	rest := *f
	rest.Agents = nil
	var paths []labelled
	for _, a := range f.Agents {
		if !slices.Contains(ids, a.ID) {
			rest.Agents = append(rest.Agents, a)
			continue
		}
		r.Agents = append(r.Agents, a.ID)
		paths = append(paths, labelled{path: f.AgentDir(a.ID)}, labelled{path: f.LogPath(a.ID)})
	}
	if len(r.Agents) == 0 {
		return r, nil
	}
	if len(rest.Agents) == 0 {
		r.Flock = append(r.Flock, "table inet flock (no agent remains)")
	}
	installed, err := h.Proxy.Config(ctx)
	if err != nil {
		return r, err
	}
	if installed != nil && len(proxy.ForFlock(&rest).Agents) == 0 {
		r.Flock = append(r.Flock, units.ProxyUnit+" and its config (no agent left has egress names or model APIs)")
	}
	r.Paths, err = present(ctx, h, paths)
	return r, err
}

// ReadRemovalAll is what RemoveAll(ctx, h, root, purge) would take away:
// every agent with a unit or a user, and each of the flock's own parts
// the host has.
func ReadRemovalAll(ctx context.Context, h Host, root string, purge bool) (Removal, error) {
	r := Removal{Purge: purge}
	sts, err := h.Units.List(ctx)
	if err != nil {
		return r, fmt.Errorf("listing flock units: %w", err)
	}
	for _, s := range sts {
		r.Agents = addID(r.Agents, strings.TrimSuffix(strings.TrimPrefix(s.Name, units.Prefix), ".service"))
	}
	accts, err := h.Users.Accounts(ctx)
	if err != nil {
		return r, err
	}
	for _, a := range accts {
		r.Agents = addID(r.Agents, strings.TrimPrefix(a.Name, "flock-"))
	}
	slices.Sort(r.Agents)
	if _, ok, err := h.Firewall.Current(ctx); err != nil {
		return r, err
	} else if ok {
		r.Flock = append(r.Flock, "table inet flock (every agent's firewall rules)")
	}
	for _, s := range []struct{ name, what string }{
		{units.BusUnit, units.BusUnit + " (the bus)"},
		{units.ProxyUnit, units.ProxyUnit + " (the egress proxy and model gateway) and its config"},
		{units.CountersSocket, units.CountersSocket + " and " + units.CountersTemplate + " (the firewall counters' reader)"},
	} {
		st, err := h.Units.Service(ctx, s.name)
		if err != nil {
			return r, err
		}
		if st.File != nil {
			r.Flock = append(r.Flock, s.what)
		}
	}
	cfg, err := h.Bus.Config(ctx)
	if err != nil {
		return r, err
	}
	keys, err := h.Bus.Keys(ctx)
	if err != nil {
		return r, fmt.Errorf("reading bus identities: %w", err)
	}
	if cfg != nil || len(keys) > 0 {
		r.Flock = append(r.Flock, "the bus's config and every credential")
	}
	if purge {
		if _, r.Readers, err = h.Users.Readers(ctx); err != nil {
			return r, err
		}
	}
	paths := []labelled{{root, "the agents' directories and logs, the shared directory"}}
	for _, p := range units.BusStateDirs {
		paths = append(paths, labelled{p, "the bus's store: tasks, results, dead letters"})
	}
	for _, p := range units.ProxyStateDirs {
		paths = append(paths, labelled{p, "the model gateway's counts"})
	}
	paths = append(paths, labelled{cluster.Dir, "this host's cluster material"}, labelled{cluster.AuthorityDir, "the cluster's authority"})
	for _, p := range SecretsPaths {
		paths = append(paths, labelled{p, "the secrets' material"})
	}
	r.Paths, err = present(ctx, h, paths)
	return r, err
}

// labelled is a path and what it holds ("": it says so itself).
type labelled struct{ path, what string }

// present are those of paths the host has, each with what it holds.
func present(ctx context.Context, h Host, paths []labelled) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p.path == "" {
			continue
		}
		_, ok, err := h.Users.PathState(ctx, p.path)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s := p.path
		if p.what != "" {
			s += " (" + p.what + ")"
		}
		out = append(out, s)
	}
	return out, nil
}

// addID adds the agent id s names to ids, once; s that names none (a
// shared group's account) is skipped.
func addID(ids []int, s string) []int {
	id, err := strconv.Atoi(s)
	if err != nil || id <= 0 || slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}
