package plan

import (
	"context"
	"fmt"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Remove deprovisions the agents with the given ids from a host whose
// applied flock is f: units stop first, then the firewall forgets their
// uids, then their users go. With purge their directories and logs go too.
// It returns the flock that remains.
func Remove(ctx context.Context, h Host, f *spec.Flock, ids []int, purge bool) (*spec.Flock, error) {
	gone := map[int]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	rest := *f
	rest.Agents = nil
	var units, names, paths []string
	for _, a := range f.Agents {
		if !gone[a.ID] {
			rest.Agents = append(rest.Agents, a)
			continue
		}
		units = append(units, spec.UnitName(a.ID))
		names = append(names, spec.UserName(a.ID))
		paths = append(paths, f.AgentDir(a.ID), f.LogPath(a.ID))
	}
	if err := stopAll(ctx, h.Units, units); err != nil {
		return nil, err
	}
	forget := names
	if len(proxy.ForFlock(&rest).Agents) == 0 {
		forget = append(forget[:len(forget):len(forget)], creds.ProxyName) // no proxy left to speak
	}
	if err := forgetIdentities(ctx, h, &rest, forget); err != nil {
		return nil, err
	}
	if err := forgetProxy(ctx, h, &rest); err != nil {
		return nil, err
	}
	if len(rest.Agents) > 0 {
		if err := h.Firewall.Ensure(ctx, netpolicy.ForFlock(&rest)); err != nil {
			return nil, fmt.Errorf("replacing table inet flock: %w", err)
		}
	} else if err := h.Firewall.Remove(ctx); err != nil {
		return nil, fmt.Errorf("removing table inet flock: %w", err)
	}
	if err := h.Users.RemoveAccounts(ctx, names); err != nil {
		return nil, fmt.Errorf("removing users: %w", err)
	}
	if purge {
		if err := h.Users.RemovePaths(ctx, paths); err != nil {
			return nil, fmt.Errorf("removing directories: %w", err)
		}
	}
	return &rest, nil
}

// forgetProxy takes removed agents off the proxy: the rest's config,
// reloaded, or no proxy once no agent has a name in its egress.
func forgetProxy(ctx context.Context, h Host, rest *spec.Flock) error {
	installed, err := h.Proxy.Config(ctx)
	if err != nil || installed == nil {
		return err
	}
	pc := proxy.ConfigFor(rest)
	if len(pc.Policy.Agents) == 0 {
		return removeProxyFrom(ctx, h)
	}
	// The rest keep the placeholders provision drew (root's to draw).
	if old, err := proxy.DecodeConfig(installed); err == nil {
		for uid, ps := range old.Placeholders {
			if _, ok := pc.Policy.Agents[uid]; ok {
				if pc.Placeholders == nil {
					pc.Placeholders = map[uint32]map[string]string{}
				}
				pc.Placeholders[uid] = ps
			}
		}
	}
	b, err := pc.Encode()
	if err != nil {
		return err
	}
	if err := h.Proxy.WriteConfig(ctx, b); err != nil {
		return fmt.Errorf("writing the proxy config: %w", err)
	}
	if st, err := h.Units.Service(ctx, units.ProxyUnit); err != nil {
		return err
	} else if st.ActiveState == "active" {
		if err := h.Units.ReloadService(ctx, units.ProxyUnit); err != nil {
			return fmt.Errorf("reloading the proxy: %w", err)
		}
	}
	return nil
}

// forgetIdentities takes names off the bus (the running bus reloads, so
// their connections close) and then deletes their credentials.
func forgetIdentities(ctx context.Context, h Host, rest *spec.Flock, names []string) error {
	keys, err := h.Bus.Keys(ctx)
	if err != nil {
		return fmt.Errorf("reading bus identities: %w", err)
	}
	for _, name := range names {
		delete(keys, name)
	}
	installed, err := h.Bus.Config(ctx)
	if err != nil {
		return err
	}
	if installed != nil {
		if err := h.Bus.WriteConfig(ctx, bus.ForFlock(rest, keys)); err != nil {
			return fmt.Errorf("writing the bus config: %w", err)
		}
		st, err := h.Units.Service(ctx, units.BusUnit)
		if err != nil {
			return err
		}
		if st.ActiveState == "active" {
			if err := h.Bus.Reload(ctx); err != nil {
				return fmt.Errorf("reloading the bus: %w", err)
			}
		}
	}
	if err := h.Bus.Remove(ctx, names); err != nil {
		return fmt.Errorf("removing bus identities: %w", err)
	}
	return nil
}

// RemoveAll deprovisions everything of flock on the host: every
// flock-agent@ unit, table inet flock, every flock user and group and the
// sysusers drop-in, flock.service, the counters reader's socket and
// template, the bus config and every credential;
// with purge also root (the agents' directories, logs and the shared
// directory), the bus's store (tasks, results, dead letters), a
// multi-host flock's material (this host's, and the authority with the
// CA's key if it is kept here), the secrets' material (SecretsPaths) and the readers' group if flock made it
// (without purge it stays, with the people an operator put in it).
func RemoveAll(ctx context.Context, h Host, root string, purge bool) error {
	sts, err := h.Units.List(ctx)
	if err != nil {
		return fmt.Errorf("listing flock units: %w", err)
	}
	for _, s := range sts {
		if err := h.Units.Stop(ctx, s.Name); err != nil {
			return fmt.Errorf("stopping %s: %w", s.Name, err)
		}
	}
	// Before the bus: the socket is its account's, which goes with it.
	if err := removeCountersFrom(ctx, h); err != nil {
		return err
	}
	if err := h.Units.RemoveService(ctx, units.BusUnit); err != nil {
		return fmt.Errorf("removing the bus: %w", err)
	}
	if err := removeProxyFrom(ctx, h); err != nil {
		return err
	}
	// Before the bus config: /etc/flock goes with it once nothing else is there.
	if purge {
		if err := h.Users.RemovePaths(ctx, []string{cluster.Dir, cluster.AuthorityDir}); err != nil {
			return fmt.Errorf("removing the cluster's material: %w", err)
		}
		if err := h.Users.RemovePaths(ctx, SecretsPaths); err != nil {
			return fmt.Errorf("removing the secrets' material: %w", err)
		}
	}
	if err := h.Bus.RemoveConfig(ctx); err != nil {
		return err
	}
	if err := h.Bus.RemoveAll(ctx); err != nil {
		return fmt.Errorf("removing bus identities: %w", err)
	}
	if err := h.Firewall.Remove(ctx); err != nil {
		return fmt.Errorf("removing table inet flock: %w", err)
	}
	if err := h.Users.RemoveAll(ctx); err != nil {
		return fmt.Errorf("removing flock users: %w", err)
	}
	if purge && root != "" {
		if err := h.Users.RemovePaths(ctx, []string{root}); err != nil {
			return fmt.Errorf("removing %s: %w", root, err)
		}
	}
	if purge {
		if err := h.Users.RemoveReaders(ctx); err != nil {
			return fmt.Errorf("removing group %s: %w", spec.ReadersGroup, err)
		}
		if err := h.Users.RemovePaths(ctx, units.BusStateDirs); err != nil {
			return fmt.Errorf("removing the bus's store: %w", err)
		}
		if err := h.Users.RemovePaths(ctx, units.ProxyStateDirs); err != nil {
			return fmt.Errorf("removing the model gateway's counts: %w", err)
		}
	}
	return nil
}
