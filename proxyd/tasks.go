package proxyd

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/wire"
)

// leasesTimeout bounds asking the desk which tasks a worker holds: the
// desk answers from memory, so only a bus that is away takes this long.
const leasesTimeout = time.Second

// busLeases asks the task desk, over the bus, which tasks an agent holds.
type busLeases struct{ nc *nats.Conn }

func (b busLeases) Held(agent int) ([]wire.Held, error) {
	subj := wire.LeasesSubject(agent)
	m, err := b.nc.Request(subj, nil, leasesTimeout)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", subj, err)
	}
	return wire.HeldBy(agent, m.Data)
}

// answerSpends answers the desk's (and the operator's) questions of what
// a task of one of this proxy's agents spent; another host's proxy
// answers for its own.
func answerSpends(nc *nats.Conn, gw *gateway.Gateway) error {
	_, err := nc.Subscribe(wire.TaskSpendSubjects, func(m *nats.Msg) {
		id, ok := wire.AgentOf(m.Subject, wire.TaskSpendSubjects)
		if !ok || !gw.Serves(id) {
			return
		}
		req, err := wire.ParseTaskSpendRequest(m.Data)
		if err != nil {
			fmt.Fprintf(os.Stderr, "[WRN] %s: %v\n", m.Subject, err)
			return
		}
		// A final answer may wait for the task's last request: not on
		// the subscription's goroutine.
		go func() {
			b, err := wire.EncodeTaskSpend(gw.TaskSpend(req.Seq, req.Final))
			if err == nil {
				err = m.Respond(b)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "[WRN] answering the spend of agent %d's task at %d: %v\n", id, req.Seq, err)
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", wire.TaskSpendSubjects, err)
	}
	return nil
}
