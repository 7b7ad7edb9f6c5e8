package events

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Counts are one uid's denied packets as table inet flock counts them:
// Refused all of them, Logged those written to the kernel log. events
// reads them, never the firewall: whoever wires CounterSource.Read
// (flockctl events) hands them over from netpolicy.
type Counts struct {
	Refused, Logged uint64
}

// CounterSource reports the firewall's per-uid counters (its sets refused
// and logged). The kernel log has a line for at most 5 refused
// packets a minute per agent, and none at all where journald does not
// read the kernel log (a container such as an nspawn machine). So:
// History gives, per agent, the packets no kernel line shows (all of them
// when KernelLog is false) since the table was last written, at the time
// of asking, for the counters have no times; Follow polls and reports the
// growth as it happens.
type CounterSource struct {
	UIDBase uint32
	Read    func(ctx context.Context) (map[uint32]Counts, error)
	// KernelLog says the journal has the kernel's lines, so the logged
	// refusals are events of their own already (Map's).
	KernelLog bool
	Every     time.Duration // Follow's poll (0: half a second)
	Now       func() time.Time

	last map[uint32]Counts
}

func (c *CounterSource) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// History is the counters as they stand.
func (c *CounterSource) History(ctx context.Context, _ time.Time) ([]Event, error) {
	cur, err := c.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the firewall's counters: %w", err)
	}
	c.last = cur
	t := c.now()
	var out []Event
	for _, uid := range sortedUIDs(cur) {
		if e, ok := c.event(t, uid, Counts{}, cur[uid], " since the table was last written"); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// Follow reports each agent's counters' growth every c.Every.
func (c *CounterSource) Follow(ctx context.Context, out chan<- Event) error {
	every := c.Every
	if every == 0 {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reading the firewall's counters: %w", err)
		}
		t := c.now()
		for _, uid := range sortedUIDs(cur) {
			was := c.last[uid]
			if cur[uid].Refused < was.Refused { // the table was written anew
				was = Counts{}
			}
			if e, ok := c.event(t, uid, was, cur[uid], ""); ok {
				select {
				case out <- e:
				case <-ctx.Done():
					return nil
				}
			}
		}
		c.last = cur
	}
}

// event is the growth of uid's counters from was to now, if any the
// kernel log does not already show.
func (c *CounterSource) event(t time.Time, uid uint32, was, now Counts, span string) (Event, bool) {
	if uid <= c.UIDBase || uid-c.UIDBase > 65535 {
		return Event{}, false
	}
	refused, logged := now.Refused-was.Refused, now.Logged-min(was.Logged, now.Logged)
	var d string
	switch {
	case !c.KernelLog && refused > 0:
		d = fmt.Sprintf("%s refused by table inet flock%s (its per-uid counter; %d logged to the kernel log, which this journal lacks)", packets(refused), span, logged)
	case c.KernelLog && refused > logged:
		d = fmt.Sprintf("%s refused by table inet flock%s beyond its kernel-log limit (its per-uid counter; the %d logged are events of their own)", packets(refused-logged), span, logged)
	default:
		return Event{}, false
	}
	return Event{Time: t, Agent: int(uid - c.UIDBase), Kind: FirewallRefused, Detail: d, Source: "firewall-counters"}, true
}

func sortedUIDs(m map[uint32]Counts) []uint32 {
	out := make([]uint32, 0, len(m))
	for uid := range m {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func packets(n uint64) string {
	if n == 1 {
		return "1 packet"
	}
	return fmt.Sprintf("%d packets", n)
}
