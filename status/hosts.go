package status

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/wire"
)

// HostsAnswers is what the other hosts' buses said of their units.
type HostsAnswers struct {
	Got    map[string]wire.HostUnits
	AskErr error // why the buses could not be asked at all
}

// AskHosts starts asking the other hosts' buses for their units over the
// connection connect makes (the operator's); wait returns their answers
// (at most operator.GatherWait later).
func (p *Placement) AskHosts(ctx context.Context, connect func(context.Context) (*nats.Conn, error)) (wait func() HostsAnswers) {
	done := make(chan HostsAnswers, 1)
	go func() {
		nc, err := connect(ctx)
		if err != nil {
			done <- HostsAnswers{AskErr: err}
			return
		}
		defer nc.Close()
		got, err := operator.GatherUnits(ctx, nc, p.Others(), operator.GatherWait)
		done <- HostsAnswers{Got: got, AskErr: err}
	}()
	return func() HostsAnswers { return <-done }
}

// remoteRow is agent a's row when it runs on another host: its unit and
// its connections and violations as that host's bus reported them, its
// heartbeat as this host's bus saw it when it did (every bus hears every
// heartbeat, and the age is then of one clock). An agent whose host did
// not answer is unknown, with the reason.
func remoteRow(f *spec.Flock, a spec.Agent, host string, ans HostsAnswers, local *wire.BusStatus, now time.Time) Agent {
	u, answered := ans.Got[host]
	au, listed := u.Agents[a.ID]
	row := Of(f, a, unitOf(au))
	row.Host, row.remote = host, true
	switch {
	case !answered && ans.AskErr != nil:
		row.unknown(fmt.Sprintf("host %s could not be asked: %v", host, ans.AskErr))
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
