package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Host is what an audit reaches of the host; fakes in tests.
type Host struct {
	Units   units.Manager
	Options units.Options // as provision builds the agents' units
	// OutDir is where each audit unit's answers go (root's, 0700).
	OutDir string
	// ReadOutput reads an audit unit's answers so far.
	ReadOutput func(path string) ([]byte, error)
	// Control runs requests as root, outside every unit.
	Control func([]probe.Request) []probe.Result
	// Explain is explain.Live of agent id: drift, exposure, known gaps.
	Explain func(ctx context.Context, id int) (explain.Report, error)
	// Wait bounds one agent's audit unit.
	Wait time.Duration
	// ModelKeys are the model APIs' keys each agent's probes look for.
	ModelKeys []ModelKey
	// Secrets are the granted secrets each agent's probes look for.
	Secrets []Secret
}

// AgentReport is one agent's part of the audit.
type AgentReport struct {
	Agent    int              `json:"agent"`
	Level    string           `json:"level"`
	Peer     int              `json:"peer"` // the agent its cross-agent probes aim at; 0 none
	Unit     string           `json:"unit"` // the audit's unit
	Probes   []Outcome        `json:"probes"`
	Drift    []explain.Drift  `json:"drift"`
	Exposure explain.Exposure `json:"exposure"`
	Open     []sandbox.Gap    `json:"open"`   // walls its level cannot close on this kernel
	Unread   []string         `json:"unread"` // explain's sources that could not be read
	// PeerUnopened are the channels the peer could not open in its
	// sandbox, with why; their probes aim at root's channels instead.
	PeerUnopened []string `json:"peer_unopened,omitempty"`
	// AsLive are the walls probed as the agent's unit has them in force,
	// where that differs from the plan (each is drift too).
	AsLive  []string `json:"as_live,omitempty"`
	Error   string   `json:"error,omitempty"`
	Elapsed float64  `json:"elapsed_ms"`
}

// Report is `flockctl audit --output json` (docs/security.md, "flockctl audit").
type Report struct {
	Agents   []AgentReport `json:"agents"`
	Probes   int           `json:"probes"`
	Escaped  int           `json:"escaped"`
	Unproven int           `json:"unproven"`
	Drift    int           `json:"drift"`
	Errors   int           `json:"errors"`
	Elapsed  float64       `json:"elapsed_ms"`
}

// Failing: any escape, unproven probe, drift, or an agent not audited.
func (r Report) Failing() bool { return r.Escaped+r.Unproven+r.Drift+r.Errors > 0 }

// Peer is the agent a's cross-agent probes aim at: the next agent of the
// flock, so every agent is some other's target.
func Peer(f *spec.Flock, id int) int {
	for i, a := range f.Agents {
		if a.ID == id && len(f.Agents) > 1 {
			return f.Agents[(i+1)%len(f.Agents)].ID
		}
	}
	return 0
}

// Run audits agents ids of f (all when empty), in parallel: one unit per
// agent runs its whole batch.
func Run(ctx context.Context, h Host, f *spec.Flock, ids []int, c Colluder) Report {
	start := time.Now()
	var agents []spec.Agent
	for _, a := range f.Agents {
		if len(ids) == 0 || containsID(ids, a.ID) {
			agents = append(agents, a)
		}
	}
	out := make([]AgentReport, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = auditAgent(ctx, h, f, a, c) }()
	}
	wg.Wait()
	// The orchestrators' floods left tasks no worker takes.
	if res := h.Control([]probe.Request{Purge(f)}); !res[0].OK && len(out) > 0 {
		out[0].Unread = append(out[0].Unread, "purging the audit's tasks ("+AuditTasks+".>) from TASKS: "+res[0].Err)
	}
	r := Report{Agents: out}
	for _, a := range out {
		r.Drift += len(a.Drift)
		if a.Error != "" {
			r.Errors++
		}
		for _, o := range a.Probes {
			r.Probes++
			switch o.Result {
			case Escaped:
				r.Escaped++
			case Unproven:
				r.Unproven++
			}
		}
	}
	r.Elapsed = ms(time.Since(start))
	return r
}

func containsID(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func auditAgent(ctx context.Context, h Host, f *spec.Flock, a spec.Agent, c Colluder) (r AgentReport) {
	start := time.Now()
	r = AgentReport{Agent: a.ID, Level: string(a.Level), Unit: units.AuditUnit(a.ID),
		Probes: []Outcome{}, Drift: []explain.Drift{}, Open: []sandbox.Gap{}, Unread: []string{}}
	defer func() { r.Elapsed = ms(time.Since(start)) }()
	t := Target{Peer: Peer(f, a.ID), Keys: h.ModelKeys, Secrets: h.Secrets, Placeholders: h.Options.Placeholders[a.ID]}
	r.Peer = t.Peer
	if t.Peer != 0 {
		if props, err := h.Units.Properties(ctx, spec.UnitName(t.Peer)); err == nil {
			if pid, ok := props["MainPID"].(uint32); ok {
				t.PeerPID = int(pid)
			}
		}
	}
	if t.Peer != 0 {
		// The peer serves its channels until a's probes are done.
		ch, unopened, stop, err := openPeer(ctx, h, f, t.Peer, c)
		defer stop()
		r.PeerUnopened = unopened
		if err != nil {
			r.Error = err.Error()
			return r
		}
		t.Channels = &ch
	}
	ps := Plan(f, a, t, c)

	controls := h.Control(Controls(ps))
	answers, took, note, err := runUnit(ctx, h, f, a, Requests(ps))
	r.AsLive = took
	// Explain reads the host once the probes are done: systemd-analyze
	// security is heavy, and on a slow host it would compete with them.
	ex, exErr := h.Explain(ctx, a.ID)
	if exErr != nil {
		r.Unread = append(r.Unread, "explain: "+exErr.Error())
	} else {
		r.Drift, r.Exposure, r.Open, r.Unread = ex.Drift, ex.Exposure, ex.Kernel.Open, append(r.Unread, ex.Unread...)
		if r.Open == nil {
			r.Open = []sandbox.Gap{}
		}
	}
	if note != "" {
		r.Unread = append(r.Unread, note)
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	for i, p := range ps {
		r.Probes = append(r.Probes, Judge(p, answers[i], controls[i], r.Open))
	}
	return r
}

// runUnit starts agent a's audit unit with reqs, with the walls a's own
// unit has in force (units.AsLive), and waits for its answers. took names
// the walls taken from the live unit; a note says when they could not be.
func runUnit(ctx context.Context, h Host, f *spec.Flock, a spec.Agent, reqs []probe.Request) (rs []probe.Result, took []string, note string, err error) {
	outPath := filepath.Join(h.OutDir, strconv.Itoa(a.ID)+".json")
	u := units.ForAudit(f, a, h.Options, probe.Batch{Requests: reqs}.Encode(), outPath)
	live, err := h.Units.Properties(ctx, spec.UnitName(a.ID))
	if err != nil {
		note = fmt.Sprintf("probed with the planned walls: the agent's unit could not be read (%v)", err)
	} else if asLive, t := units.AsLive(u, live); len(t) > 0 {
		serr := h.Units.Start(ctx, asLive)
		if serr == nil {
			defer h.Units.Stop(context.WithoutCancel(ctx), u.Name)
			rs, err := answers(ctx, h, u.Name, outPath)
			return rs, t, "", err
		}
		note = fmt.Sprintf("probed with the planned walls: systemd refused the live unit's %v (%v)", t, serr)
	}
	if err := h.Units.Start(ctx, u); err != nil {
		return nil, nil, note, fmt.Errorf("starting %s: %w", u.Name, err)
	}
	defer h.Units.Stop(context.WithoutCancel(ctx), u.Name)
	rs, err = answers(ctx, h, u.Name, outPath)
	return rs, nil, note, err
}

// openPeer starts agent peer's colluder unit: its own unit's walls,
// opening the channels of PeerColluder(c) from inside them and holding
// them until stop.
func openPeer(ctx context.Context, h Host, f *spec.Flock, peer int, c Colluder) (Colluder, []string, func(), error) {
	noop := func() {}
	var a spec.Agent
	for _, x := range f.Agents {
		if x.ID == peer {
			a = x
		}
	}
	pc := PeerColluder(c, peer)
	outPath := filepath.Join(h.OutDir, strconv.Itoa(peer)+"-peer.json")
	u := units.ForAuditPeer(f, a, h.Options, probe.Batch{Requests: pc.Opens(), Hold: true}.Encode(), outPath)
	if err := h.Units.Start(ctx, u); err != nil {
		return pc, nil, noop, fmt.Errorf("starting the colluding peer %s: %w", u.Name, err)
	}
	stop := func() { h.Units.Stop(context.WithoutCancel(ctx), u.Name) }
	rs, err := answers(ctx, h, u.Name, outPath)
	if err != nil {
		return pc, nil, stop, fmt.Errorf("the colluding peer: %w", err)
	}
	pc, unopened, err := pc.Opened(rs)
	if err != nil {
		return pc, nil, stop, fmt.Errorf("the colluding peer, agent %d, in %s: %w", peer, u.Name, err)
	}
	return pc, unopened, stop, nil
}

// answers waits for the answered batch of unit name in outPath.
func answers(ctx context.Context, h Host, name, outPath string) ([]probe.Result, error) {
	wait := h.Wait
	if wait == 0 {
		// A unit's start and a batch bounded by probe.Timeout, on a
		// host as slow as a VM under software emulation.
		wait = 60 * time.Second
	}
	deadline := time.Now().Add(wait)
	var last error
	for {
		data, err := h.ReadOutput(outPath)
		if err == nil {
			b, derr := lastBatch(data)
			if derr == nil {
				return b.Results, nil
			}
			err = derr
		}
		last = err
		props, perr := h.Units.Properties(ctx, name)
		if state, _ := props["ActiveState"].(string); errors.Is(perr, units.ErrNotLoaded) || state == "failed" || state == "inactive" {
			// Gone: it ended; read once more, it may have just finished.
			if data, err := h.ReadOutput(outPath); err == nil {
				if b, err := lastBatch(data); err == nil {
					return b.Results, nil
				}
			}
			return nil, fmt.Errorf("%s ended without answering (journalctl -u %s): %v", name, name, last)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not answer within %s (journalctl -u %s): %v", name, wait, name, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lastBatch is the answered batch on the output's last line: a runtime
// may write a line of its own before the agent starts.
func lastBatch(data []byte) (probe.Batch, error) {
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	return probe.Decode(lines[len(lines)-1], true)
}
