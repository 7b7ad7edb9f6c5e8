package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// placement is where a multi-host flock's agents run, for the HOST column
// of status and tasks; nil for a flock on one host (no column, output as
// before flocks spanned hosts).
type placement struct {
	self  string         // this host; "" when it cannot be told (then every agent is asked of its host's bus)
	of    map[int]string // agent id -> its host
	hosts []string       // every host: the spec's order, else sorted
}

// placementOf reads the placement from the spec when it spans hosts, else
// from the bus config's cluster (a flockctl given a spec of one host on a
// host still provisioned as one of several); nil when neither spans hosts.
func placementOf(f *spec.Flock, cfg *bus.Config) *placement {
	clustered := cfg != nil && cfg.Cluster != nil
	if !clustered && (f == nil || !f.Clustered()) {
		return nil
	}
	p := &placement{of: map[int]string{}}
	if clustered {
		p.self = cfg.Cluster.Server
		maps.Copy(p.of, cfg.Cluster.Hosts)
	}
	if f != nil && f.Clustered() {
		for _, a := range f.Agents {
			p.of[a.ID] = a.Host
		}
		for _, h := range f.Hosts {
			p.hosts = append(p.hosts, h.Name)
		}
		if p.self == "" {
			// As provision tells it; none or several: cannot tell.
			if addrs, err := proxy.HostAddrs(); err == nil {
				p.self, _ = hostOf(f, addrs)
			}
		}
		return p
	}
	p.hosts = slices.Sorted(maps.Values(p.of))
	if p.self != "" {
		p.hosts = append(p.hosts, p.self)
		slices.Sort(p.hosts)
	}
	p.hosts = slices.Compact(p.hosts)
	return p
}

// host is agent id's host; "" on one host.
func (p *placement) host(id int) string {
	if p == nil {
		return ""
	}
	return p.of[id]
}

// local reports whether agent id runs here (every agent on one host).
func (p *placement) local(id int) bool { return p == nil || p.of[id] == p.self }

// others is every host but this one: the hosts whose buses are asked.
func (p *placement) others() []string {
	var out []string
	for _, h := range p.hosts {
		if h != p.self {
			out = append(out, h)
		}
	}
	return out
}

// hostsAnswers is what the other hosts' buses said of their units.
type hostsAnswers struct {
	got    map[string]wire.HostUnits
	askErr error // why the buses could not be asked at all
}

// askHosts starts asking the other hosts' buses for their units; wait
// returns their answers (at most operator.GatherWait later).
func (p *placement) askHosts(ctx context.Context) (wait func() hostsAnswers) {
	done := make(chan hostsAnswers, 1)
	go func() {
		nc, err := operatorConn(ctx)
		if err != nil {
			done <- hostsAnswers{askErr: err}
			return
		}
		defer nc.Close()
		got, err := operator.GatherUnits(ctx, nc, p.others(), operator.GatherWait)
		done <- hostsAnswers{got: got, askErr: err}
	}()
	return func() hostsAnswers { return <-done }
}

// remoteRow is agent a's row when it runs on another host: its unit and
// its connections and violations as that host's bus reported them, its
// heartbeat as this host's bus saw it when it did (every bus hears every
// heartbeat, and the age is then of one clock). An agent whose host did
// not answer is unknown, with the reason.
func remoteRow(f *spec.Flock, a spec.Agent, host string, ans hostsAnswers, local *wire.BusStatus, now time.Time) agentStatus {
	u, answered := ans.got[host]
	au, listed := u.Agents[a.ID]
	row := statusOf(f, a, unitOf(au))
	row.Host, row.remote = host, true
	switch {
	case !answered && ans.askErr != nil:
		row.unknown(fmt.Sprintf("host %s could not be asked: %v", host, ans.askErr))
	case !answered:
		row.unknown(fmt.Sprintf("host %s did not answer", host))
	case !listed:
		row.unknown(fmt.Sprintf("host %s's bus does not list agent %d as its own (flockctl provision on %s)", host, a.ID, host))
	case u.Error != "":
		row.unknown(fmt.Sprintf("host %s: %s", host, u.Error))
	}
	if listed {
		row.busFields(&wire.BusStatus{Agents: map[int]wire.AgentOnBus{a.ID: au.Bus}}, now)
	} else {
		row.Bus = "unknown"
	}
	if local != nil {
		if at := local.Agents[a.ID].HeartbeatAt; at != nil {
			age := now.Sub(*at).Seconds()
			row.LastHeartbeat, row.HeartbeatAgeS = at, &age
		}
	}
	return row
}

// unitOf is a unit on the wire as systemd's status.
func unitOf(au wire.AgentUnit) units.Status {
	return units.Status{Name: au.Unit, ActiveState: au.ActiveState, SubState: au.SubState,
		Restarts: au.Restarts, LastExit: units.Exit{Code: au.ExitCode, Status: au.ExitStatus}}
}

// unknown marks a row whose unit state could not be read, and why.
func (r *agentStatus) unknown(why string) {
	r.State, r.SubState, r.StateNote = "unknown", "", why
	r.Restarts, r.LastExit = 0, ""
}
