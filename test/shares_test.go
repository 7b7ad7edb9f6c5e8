package test

// Tier: root + nspawn (+ podman, crun, runsc). One agent floods its shares
// of the bus and the proxy from inside its unit, each in turn and then
// with a colluding second agent, at every level; meanwhile a third agent
// keeps heartbeating and doing tasks, a fourth is restarted and
// reconnects, and the operator's status answers. Every flood is refused
// at its share and counted against its agent, and against no one else.

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/units"
)

// The agents of TestShares: a flooder and its colluder per level, the
// bystander worker and the agent restarted during each flood.
const (
	bystander = 7
	restarted = 8
)

type floodPair struct {
	level             string
	flooder, colluder int
}

var floodPairs = []floodPair{{"process", 1, 2}, {"podman", 3, 4}, {"gvisor", 5, 6}}

// Small shares, so each flood meets its share in a moment.
const testShares = "{connections: 4, tasks: 20, task_bytes: 2M, tunnels: 3, handshakes: 2}"

func sharesSpec() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bus: {max_subscriptions: %d, max_pending: %dK}\ndefaults:\n  heartbeat: 1s\n  shares: %s\nagents:\n",
		spec.MinMaxSubscriptions, spec.MinMaxPending>>10, testShares)
	for _, p := range floodPairs {
		root := ""
		if p.level != "process" {
			root = fmt.Sprintf("    level: %s\n    rootfs: %s\n", p.level, harness.Rootfs)
		}
		for _, a := range []struct {
			id   int
			role string
		}{{p.flooder, "orchestrator"}, {p.colluder, "monitor"}} {
			fmt.Fprintf(&b, "  - id: %d\n    role: %s\n%s    exec: [\"/usr/local/bin/probe\", \"serve\"]\n    egress: [\"api.flock.test:443\"]\n"+
				"    subjects: {publish: [\"collude.>\"], subscribe: [\"collude.>\"]}\n", a.id, a.role, root)
		}
	}
	fmt.Fprintf(&b, "  - id: %d\n    command: [\"/usr/bin/tr\", \"a-z\", \"A-Z\"]\n  - id: %d\n    command: [\"/usr/bin/tr\", \"a-z\", \"A-Z\"]\n", bystander, restarted)
	return b.String()
}

// flood is one attack: its requests (run at once, by the flooder and
// maybe the colluder) and the violation kinds it must leave counted.
type flood struct {
	name  string
	reqs  func(p floodPair) map[int][]map[string]any
	kinds []string
}

var floods = []flood{
	{"connections", func(p floodPair) map[int][]map[string]any {
		return map[int][]map[string]any{p.flooder: {{"op": "nats-connections", "count": 10}}}
	}, []string{"connections"}},
	{"subscriptions", func(p floodPair) map[int][]map[string]any {
		return map[int][]map[string]any{p.flooder: {{"op": "nats-subscriptions", "name": "_INBOX.flock-" + strconv.Itoa(p.flooder) + ".flood", "count": spec.MinMaxSubscriptions + 1}}}
	}, []string{"subscriptions"}},
	{"slow consumption", func(p floodPair) map[int][]map[string]any {
		return map[int][]map[string]any{
			p.flooder: {{"op": "nats-slow", "name": "collude.slow", "count": 4000, "timeout_ms": 20000, "background": true}},
			// Once the flooder listens: a publish no one hears is dropped.
			p.colluder: {{"op": "sleep", "count": 1000}, {"op": "nats-flood", "name": "collude.slow", "count": 60, "size": 1 << 20, "timeout_ms": 20000}},
		}
	}, []string{"slow-consumer"}},
	{"maximum-size messages", func(p floodPair) map[int][]map[string]any {
		events := "agent." + strconv.Itoa(p.flooder) + ".events"
		return map[int][]map[string]any{p.flooder: {
			{"op": "nats-flood", "name": events, "count": 30, "size": spec.MaxMessage - 1024, "timeout_ms": 30000},
			{"op": "nats-oversize", "name": events, "size": spec.MaxMessage + 1},
		}}
	}, []string{"payload"}},
	{"tasks", func(p floodPair) map[int][]map[string]any {
		return map[int][]map[string]any{p.flooder: {{"op": "desk-send", "name": "tasks.flock-test." + strconv.Itoa(p.flooder), "count": 25, "size": 1000, "timeout_ms": 20000}}}
	}, []string{"tasks"}},
	{"proxy tunnels and handshakes", func(p floodPair) map[int][]map[string]any {
		return map[int][]map[string]any{p.flooder: {
			{"op": "proxy-flood", "addr": "api.flock.test:443", "name": "api.flock.test", "data": "carry", "count": 5, "timeout_ms": 10000},
			// The tunnels' places are given back as the proxy sees them close.
			{"op": "sleep", "count": 2000},
			{"op": "proxy-flood", "addr": "api.flock.test:443", "count": 5, "timeout_ms": 10000},
		}}
	}, []string{"tunnels", "handshakes"}},
}

// together is every flood at once, the colluder flooding its own shares
// beside the flooder's.
var together = flood{"together, with a colluder", func(p floodPair) map[int][]map[string]any {
	out := map[int][]map[string]any{}
	add := func(id int, reqs []map[string]any) {
		for _, r := range reqs {
			if r["op"] != "sleep" {
				r["background"] = true // all at once
			}
			out[id] = append(out[id], r)
		}
	}
	for _, f := range floods {
		for id, reqs := range f.reqs(p) {
			add(id, reqs)
		}
	}
	// The colluder's own shares, once its flood at the slow reader holds
	// its connection.
	out[p.colluder] = append(out[p.colluder], map[string]any{"op": "sleep", "count": 300})
	for _, f := range []flood{floods[0], floods[1], floods[5]} {
		add(p.colluder, f.reqs(floodPair{flooder: p.colluder})[p.colluder])
	}
	return out
}, nil}

func TestShares(t *testing.T) {
	// Tier: root + nspawn, podman and runsc.
	requireRuntimes(t)
	m := harness.Boot(t)
	provision(t, m, sharesSpec())
	ids := []int{bystander, restarted}
	for _, p := range floodPairs {
		ids = append(ids, p.flooder, p.colluder)
	}
	slices.Sort(ids)
	waitActive(t, m, ids...)
	// The rootfs the podman and gVisor agents share, its mount points
	// made by whichever launcher came first: each readable (crun made
	// missing ones 0700, which every gVisor agent's gofer then failed to
	// open, at every start).
	r := harness.Rootfs
	modes := mustRun(t, m, "stat", "-c", "%a %n", r+"/.flock", r+"/.flock/flock-agent", r+"/.flock/nats", r+"/srv/flock")
	if want := fmt.Sprintf("755 %s/.flock\n644 %s/.flock/flock-agent\n644 %s/.flock/nats\n755 %s/srv/flock\n", r, r, r, r); modes != want {
		t.Errorf("the shared rootfs's mount points:\n%swant\n%s", modes, want)
	}
	waitBus(t, m, time.Time{}, bystander, restarted)
	tlsUpstream(t, m)

	quiet := roundTrips(t, m, 20)
	t.Logf("the bystander's task round trip, quiet: %s", quiet)
	for _, p := range floodPairs {
		t.Run(p.level, func(t *testing.T) {
			startedProbe(t, m, p.flooder)
			startedProbe(t, m, p.colluder)
			for _, f := range append(append([]flood(nil), floods...), together) {
				t.Run(f.name, func(t *testing.T) { floodOnce(t, m, p, f) })
			}
		})
	}
	for _, r := range status(t, m) {
		if (r.ID == bystander || r.ID == restarted) && r.Violations != 0 {
			t.Errorf("agent %d, no flooder, has violations %v", r.ID, r.ByKind)
		}
	}
	// The services after every flood: within their bounds.
	for _, svc := range []struct {
		unit string
		high int
	}{{"flock.service", units.BusMemoryHigh}, {"flock-proxy.service", units.ProxyMemoryHigh}} {
		use := serviceUse(t, m, svc.unit)
		t.Logf("%s after the floods: %s", svc.unit, use)
		var peak int
		if _, err := fmt.Sscanf(use[strings.Index(use, "VmHWM:"):], "VmHWM: %d kB", &peak); err != nil || peak<<10 > svc.high {
			t.Errorf("%s peaked at %d kB, beyond its MemoryHigh %d (%v)", svc.unit, peak, svc.high>>10, err)
		}
	}
}

// floodOnce runs f from inside p's agents while the bystander does tasks
// and heartbeats and the restarted agent comes back; every request of f
// must be refused at its share (never unproven), its kinds counted
// against the flooder, and nobody else notice.
func floodOnce(t *testing.T, m *harness.Machine, p floodPair, f flood) {
	before := map[int]agentStatus{}
	for _, r := range status(t, m) {
		before[r.ID] = r
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var trips tripStats
	bg.Add(1)
	go func() { defer bg.Done(); trips = tasksUntil(m, stop) }()

	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]probeResult{}
	for id, reqs := range f.reqs(p) {
		// Each agent's requests in their order (a pause before a
		// publisher, between two floods), their answers awaited at once.
		names := make([]string, len(reqs))
		for i, req := range reqs {
			names[i] = submit(m, id, req)
		}
		for i, req := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := answerOf(m, id, names[i], req)
				mu.Lock()
				results[fmt.Sprintf("agent %d, %s #%d", id, req["op"], i)] = r
				mu.Unlock()
			}()
		}
	}
	// A restarted agent reconnects while the flood goes on.
	restart := time.Now()
	mustRun(t, m, "systemctl", "restart", unitName(restarted))
	back := waitBus(t, m, restart, restarted)
	statusStart := time.Now()
	statusOut(t, m)
	statusTook := time.Since(statusStart)
	wg.Wait()
	close(stop)
	bg.Wait()

	published := true // the slow reader's colluder got its messages out
	for what, r := range results {
		if strings.HasPrefix(what, fmt.Sprintf("agent %d, nats-flood", p.colluder)) && !r.OK {
			published = false
			t.Logf("%s: %s", what, r)
		}
	}
	for what, r := range results {
		switch {
		case strings.Contains(what, "nats-flood") || strings.Contains(what, "sleep"):
			// The publishers of a flood, and a pause: no share's.
		case r.OK && strings.Contains(what, "nats-slow") && !published:
			// All at once, the colluder's own floods took the connection
			// it would have published on: nothing came to read slowly.
			t.Logf("%s: nothing was published at it: %s", what, r)
		case r.OK:
			t.Errorf("ESCAPE: %s got beyond its share: %s", what, r)
		case r.TimedOut && f.kinds == nil && strings.Contains(r.Err, "Authorization Violation"):
			// All at once, a flood may find the agent's connections
			// taken by the others: refused by that share.
			t.Logf("%s: refused its first connection: %s", what, r.Err)
		case r.TimedOut:
			t.Errorf("%s proved nothing (refused before holding anything, or hung): %s", what, r)
		default:
			t.Logf("%s: refused: %s", what, r.Err)
		}
	}
	after := map[int]agentStatus{}
	for _, r := range status(t, m) {
		after[r.ID] = r
	}
	for _, kind := range f.kinds {
		if after[p.flooder].ByKind[kind] <= before[p.flooder].ByKind[kind] {
			t.Errorf("agent %d's %s violations did not grow: %d -> %d", p.flooder, kind, before[p.flooder].ByKind[kind], after[p.flooder].ByKind[kind])
		}
	}
	for _, id := range []int{bystander, restarted} {
		if after[id].Violations != 0 {
			t.Errorf("agent %d, who did nothing, has violations %v", id, after[id].ByKind)
		}
	}
	if trips.lost > 0 || trips.n == 0 {
		t.Errorf("the bystander during the flood: %s", trips)
	}
	if hb := after[bystander].LastHeartbeat; hb == nil || time.Since(*hb) > 5*time.Second {
		t.Errorf("the bystander's last heartbeat: %v", hb)
	}
	t.Logf("bystander: %s; agent %d back on the bus %s after its restart; status took %s",
		trips, restarted, back.Sub(restart).Round(time.Millisecond), statusTook.Round(time.Millisecond))
	// The flood's tasks are no worker's: gone before the next flood.
	mustRun(t, m, "flockctl", "tasks") // answers while they are there
	purgeFloodTasks(t, m)
}

// submit places req in agent id's probe inbox and returns its name ("" if
// it could not be placed).
func submit(m *harness.Machine, id int, req map[string]any) string {
	body, _ := json.Marshal(req)
	name := fmt.Sprintf("%06d", probeSeq.Add(1))
	base := path.Join(agentsDir, strconv.Itoa(id), "probe")
	tmp := path.Join(base, "in", name+".tmp")
	if err := m.WriteFile(tmp, body, 0o644); err != nil {
		return ""
	}
	if _, _, err := runBG(m, "mv", tmp, path.Join(base, "in", name+".json")); err != nil {
		return ""
	}
	return name
}

// answerOf waits for agent id's answer to the request submitted as name,
// past the request's own bound; safe from any goroutine.
func answerOf(m *harness.Machine, id int, name string, req map[string]any) probeResult {
	if name == "" {
		return probeResult{Err: fmt.Sprintf("agent %d: the request %v could not be placed", id, req), TimedOut: true}
	}
	wait := 30 * time.Second
	if ms, ok := req["timeout_ms"].(int); ok {
		wait += time.Duration(ms) * time.Millisecond
	}
	if req["op"] == "sleep" {
		wait += time.Duration(req["count"].(int)) * time.Millisecond
	}
	out := path.Join(agentsDir, strconv.Itoa(id), "probe", "out", name+".json")
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := m.ReadFile(out); err == nil {
			var r probeResult
			if json.Unmarshal(b, &r) == nil {
				return r
			}
		}
	}
	return probeResult{Err: fmt.Sprintf("agent %d did not answer %v within %s", id, req, wait), TimedOut: true}
}

// tripStats are the bystander's task round trips: how many, how many
// lost, and their quantiles.
type tripStats struct {
	n, lost  int
	p50, p99 time.Duration
}

func (s tripStats) String() string {
	return fmt.Sprintf("%d tasks, %d lost, round trip p50 %s p99 %s", s.n, s.lost, s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond))
}

// runBG is run without a test: from a goroutine of its own.
func runBG(m *harness.Machine, argv ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
	defer cancel()
	return m.Run(ctx, argv...)
}

// roundTrips sends n tasks to the bystander, one after another.
func roundTrips(t *testing.T, m *harness.Machine, n int) tripStats {
	t.Helper()
	var s tripStats
	var took []time.Duration
	for i := range n {
		start := time.Now()
		out, _, err := run(t, m, "flockctl", "send", "--to", strconv.Itoa(bystander), "quiet "+strconv.Itoa(i))
		if err != nil || strings.TrimSpace(out) != "QUIET "+strconv.Itoa(i) {
			s.lost++
			continue
		}
		took = append(took, time.Since(start))
	}
	return withQuantiles(s, took, n)
}

// tasksUntil sends tasks to the bystander, one after another, until stop.
func tasksUntil(m *harness.Machine, stop <-chan struct{}) tripStats {
	var s tripStats
	var took []time.Duration
	n := 0
	for {
		select {
		case <-stop:
			return withQuantiles(s, took, n)
		default:
		}
		start := time.Now()
		want := "DURING " + strconv.Itoa(n)
		out, _, err := runBG(m, "flockctl", "send", "--to", strconv.Itoa(bystander), strings.ToLower(want))
		n++
		if err != nil || strings.TrimSpace(out) != want {
			s.lost++
			continue
		}
		took = append(took, time.Since(start))
	}
}

func withQuantiles(s tripStats, took []time.Duration, n int) tripStats {
	s.n = n
	if len(took) == 0 {
		return s
	}
	slices.Sort(took)
	s.p50, s.p99 = took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	return s
}

// purgeFloodTasks removes the floods' tasks, which no worker takes.
func purgeFloodTasks(t *testing.T, m *harness.Machine) {
	t.Helper()
	req := `{"op":"nats-request","addr":"nats://127.0.0.1:4222","path":"/var/lib/flock/creds/operator.nk","name":"$JS.API.STREAM.PURGE.TASKS","data":"{\"filter\":\"tasks.flock-test.>\"}"}`
	if out := mustRun(t, m, probeBin, "attempt", req); !strings.Contains(out, `"ok":true`) {
		t.Errorf("purging the floods' tasks: %s", out)
	}
}
