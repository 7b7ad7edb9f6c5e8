package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

func TestJudge(t *testing.T) {
	ok, no := probe.Result{OK: true, Detail: "worked"}, probe.Result{Err: "permission denied"}
	hung := probe.Result{Err: "timed out after 2s", TimedOut: true}
	gap := []sandbox.Gap{{Wall: "abstract UNIX sockets", Why: "no Landlock IPC scope"}}
	plain, abstract, optional := Probe{Name: "p"}, Probe{Name: "a", Wall: "abstract UNIX sockets"}, Probe{Name: "o", Optional: true}
	for _, tc := range []struct {
		name          string
		p             Probe
		got, control  probe.Result
		gaps          []sandbox.Gap
		want          Result
		failing       bool
		detailContain string
	}{
		{"refused in the unit, works as root", plain, no, ok, nil, Blocked, false, "permission denied"},
		{"works in the unit", plain, ok, ok, nil, Escaped, true, "worked"},
		{"works in the unit though root cannot", plain, ok, no, nil, Escaped, true, "worked"},
		{"refused everywhere", plain, no, no, nil, Unproven, true, "permission denied"},
		{"optional, refused everywhere", optional, no, no, nil, Absent, false, ""},
		{"optional, works in the unit", optional, ok, ok, nil, Escaped, true, ""},
		{"a known gap", abstract, ok, ok, gap, Open, false, ""},
		{"a gap of another wall", plain, ok, ok, gap, Escaped, true, ""},
		{"the gap's wall, closed here", abstract, no, ok, gap, Blocked, false, ""},
		{"read an empty mount point", Probe{Req: probe.Request{Op: "read-file"}}, probe.Result{OK: true}, ok, nil, Blocked, false, "empty mount point"},
		{"read the file", Probe{Req: probe.Request{Op: "read-file"}}, ok, ok, nil, Escaped, true, "worked"},
		{"hung in the unit, works as root", plain, hung, ok, nil, Unproven, true, "timed out"},
		{"optional, hung in the unit", optional, hung, no, nil, Unproven, true, "timed out"},
	} {
		o := Judge(tc.p, tc.got, tc.control, tc.gaps)
		if o.Result != tc.want || o.Failing() != tc.failing || !strings.Contains(o.Detail, tc.detailContain) {
			t.Errorf("%s: %+v; want %s (failing %v)", tc.name, o, tc.want, tc.failing)
		}
	}
}

func testFlock(t *testing.T, yaml string) *spec.Flock {
	t.Helper()
	f, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const twoAgents = "agents:\n  - id: 1\n    role: monitor\n  - id: 2\n    role: worker\n"

var colluder = Colluder{TCPPort: 4000, UDPPort: 4001, Abstract: "@x", UnixTmp: "/tmp/x.sock", MsgKey: 1, ShmKey: 2, MQName: "/x", Files: []string{"/tmp/x", "/dev/shm/x"}}

func TestPlan(t *testing.T) {
	f := testFlock(t, twoAgents)
	ps := Plan(f, f.Agents[0], Target{Peer: 2, PeerPID: 99}, colluder)
	if len(ps) < 40 {
		t.Errorf("%d probes; want at least 40", len(ps))
	}
	names, cats := map[string]bool{}, map[string]int{}
	for _, p := range ps {
		if names[p.Name] {
			t.Errorf("probe %q twice", p.Name)
		}
		names[p.Name] = true
		cats[p.Category]++
		if p.Req.Op == "" || p.Control.Op == "" {
			t.Errorf("%q: no op or no control: %+v", p.Name, p)
		}
		if p.Category == "bus" && (p.Control.Path == "" || p.Control.Addr == "") {
			t.Errorf("%q: its control does not speak as the operator: %+v", p.Name, p.Control)
		}
		if p.Category == "bus" && p.Req.Addr != "" {
			t.Errorf("%q: the agent's side must use its own bus address: %+v", p.Name, p.Req)
		}
	}
	for _, c := range []string{"files", "processes", "ipc", "network", "bus", "host", "kernel"} {
		if cats[c] == 0 {
			t.Errorf("no probe of category %s", c)
		}
	}
	for _, want := range []string{"read another agent's file", "ptrace another agent's process", "publish a forged task result", "map memory writable and executable"} {
		if !names[want] {
			t.Errorf("no probe %q", want)
		}
	}

	f = testFlock(t, "agents:\n  - id: 1\n    level: gvisor\n    rootfs: /r\n  - id: 2\n")
	for _, p := range Plan(f, f.Agents[0], Target{Peer: 2, PeerPID: 9}, colluder) {
		if p.Req.Op == "userns" || (p.Req.Op == "find-pid" && p.Req.PID == 1) {
			t.Errorf("gvisor: %q planned; its Sentry has its own user namespaces and PID 1", p.Name)
		}
	}

	// Agent 2, a worker with JIT, alone: no peer, no forged result (its
	// role may publish results), no W^X probe.
	f = testFlock(t, "agents:\n  - id: 2\n    role: worker\n    jit: true\n")
	alone := Plan(f, f.Agents[0], Target{Peer: Peer(f, 2)}, colluder)
	for _, p := range alone {
		if strings.Contains(p.Name, "another agent") || p.Name == "publish a forged task result" || p.Req.Op == "mmap-rwx" {
			t.Errorf("agent 2 alone: %q planned", p.Name)
		}
	}
}

// The shares' floods run alone on both sides; an agent that reaches the
// proxy floods its handshakes, its control holds its share as its uid.
func TestSharesProbes(t *testing.T) {
	f := testFlock(t, "agents:\n  - id: 1\n    egress: [\"api.example.com:443\"]\n    shares: {tunnels: 5, handshakes: 3}\n  - id: 2\n    role: orchestrator\n")
	const name = "hold more proxy handshakes than its share"
	for _, tc := range []struct {
		agent     spec.Agent
		proxy     bool
		orchestra bool
	}{{f.Agents[0], true, false}, {f.Agents[1], false, true}} {
		found := map[string]Probe{}
		for _, p := range Plan(f, tc.agent, Target{Peer: Peer(f, tc.agent.ID)}, colluder) {
			if p.Category != "shares" {
				continue
			}
			found[p.Name] = p
			if !p.Req.Alone || !p.Control.Alone {
				t.Errorf("agent %d: %q: not alone on both sides: %+v / %+v", tc.agent.ID, p.Name, p.Req, p.Control)
			}
		}
		if _, ok := found["send more tasks than its share of TASKS"]; ok != tc.orchestra {
			t.Errorf("agent %d (%s): tasks flood planned %v", tc.agent.ID, tc.agent.Role, ok)
		}
		p, ok := found[name]
		if ok != tc.proxy {
			t.Fatalf("agent %d (needs the proxy %v): %q planned %v", tc.agent.ID, tc.agent.NeedsProxy(), name, ok)
		}
		if !ok {
			continue
		}
		want := probe.Request{Op: "proxy-handshakes", Addr: spec.DefaultProxyListen, Name: "flock-audit.invalid:443", Count: 4, Alone: true}
		control := want
		control.Count, control.Key = 3, int(f.UID(1))
		if !reflect.DeepEqual(p.Req, want) || !reflect.DeepEqual(p.Control, control) {
			t.Errorf("%q: %+v, control %+v; want %+v, control %+v", name, p.Req, p.Control, want, control)
		}
	}
}

func TestPeer(t *testing.T) {
	f := testFlock(t, "agents:\n  - id: 1\n  - id: 5\n  - id: 7\n")
	for id, want := range map[int]int{1: 5, 5: 7, 7: 1, 9: 0} {
		if got := Peer(f, id); got != want {
			t.Errorf("Peer(%d) = %d, want %d", id, got, want)
		}
	}
}

// fakeHost answers every batch by what its agent() says of each request,
// the way flock-agent's probe mode would, and root's controls by control().
func fakeHost(t *testing.T, u *units.Fake, agentSays func(probe.Request) probe.Result, drift map[int][]explain.Drift) Host {
	var mu sync.Mutex
	return Host{
		Units: u, OutDir: "/run/flock-audit",
		ReadOutput: func(path string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, name := range u.Started() {
				props, err := u.Properties(context.Background(), name)
				if err != nil || props["StandardOutputFile"] != path {
					continue
				}
				argv := props["ExecStart"].([]units.ExecCommand)[0].Argv
				args, err := agent.ParseUnitArgs(argv[1:])
				if err != nil || args[0] != "probe" {
					t.Fatalf("audit unit %s runs %q (%v); want flock-agent probe BATCH", name, argv, err)
				}
				b, err := probe.Decode([]byte(args[1]), false)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range b.Requests {
					if b.Hold { // the colluding peer opens all; its ports by place
						b.Results = append(b.Results, probe.Result{OK: true, Detail: "[::]:" + strconv.Itoa(5000+i)})
						continue
					}
					b.Results = append(b.Results, agentSays(r))
				}
				return b.Encode(), nil
			}
			return nil, nil
		},
		Control: func(reqs []probe.Request) []probe.Result {
			out := make([]probe.Result, len(reqs))
			for i := range out {
				out[i] = probe.Result{OK: true, Detail: "root did it"}
			}
			return out
		},
		Explain: func(ctx context.Context, id int) (explain.Report, error) {
			return explain.Report{Agent: id, Drift: drift[id]}, nil
		},
	}
}

func TestRun(t *testing.T) {
	f := testFlock(t, twoAgents)
	refuseAll := func(probe.Request) probe.Result { return probe.Result{Err: "permission denied"} }
	canary, _ := Canaries(f, 2)
	leakCanary := func(r probe.Request) probe.Result {
		if r.Op == "read-file" && r.Path == canary {
			return probe.Result{OK: true, Detail: "the canary"}
		}
		return refuseAll(r)
	}
	peerPort := PeerColluder(colluder, 2)
	peerPort.TCPPort = 5000 // the fake peer's first answer
	reachPeer := func(r probe.Request) probe.Result {
		if r.Op == "connect-tcp" && r.Addr == "127.0.0.1:5000" {
			return probe.Result{OK: true, Detail: "connected, echo flock-collude:ping"}
		}
		return refuseAll(r)
	}
	reachRoot := func(r probe.Request) probe.Result {
		if r.Op == "connect-tcp" && r.Addr == "127.0.0.1:4000" {
			return probe.Result{OK: true, Detail: "connected"}
		}
		return refuseAll(r)
	}
	for _, tc := range []struct {
		name       string
		agent      func(probe.Request) probe.Result
		drift      map[int][]explain.Drift
		escaped    int
		driftCount int
	}{
		{"every wall holds", refuseAll, nil, 0, 0},
		{"an agent reaches its peer's loopback port", reachPeer, nil, 2, 0},   // 1 to 2, 2 to 1: both peers' ports are 5000 here
		{"an agent reaches a host service on loopback", reachRoot, nil, 2, 0}, // root's port: no peer colludes in it
		{"agent 1 reads agent 2's file", leakCanary, nil, 1, 0},
		{"agent 2's directory drifted", refuseAll, map[int][]explain.Drift{2: {{Kind: "path", What: "/srv/flock/agents/2", Want: "0700", Have: "0755"}}}, 0, 1},
	} {
		u := units.NewFake()
		r := Run(context.Background(), fakeHost(t, u, tc.agent, tc.drift), f, nil, colluder)
		if r.Escaped != tc.escaped || r.Drift != tc.driftCount || r.Unproven != 0 || r.Errors != 0 || r.Failing() != (tc.escaped+tc.driftCount > 0) {
			t.Errorf("%s: escaped %d, drift %d, unproven %d, errors %d, failing %v", tc.name, r.Escaped, r.Drift, r.Unproven, r.Errors, r.Failing())
		}
		if len(r.Agents) != 2 || r.Agents[0].Peer != 2 || r.Agents[1].Peer != 1 || r.Agents[0].Elapsed <= 0 {
			t.Errorf("%s: agents %+v", tc.name, r.Agents)
		}
		if got := u.Started(); len(got) != 4 {
			t.Errorf("%s: units started %v; want one per agent and one per peer", tc.name, got)
		}
		for _, a := range r.Agents {
			for _, name := range []string{a.Unit, units.AuditPeerUnit(a.Peer)} {
				if _, err := u.Properties(context.Background(), name); err == nil {
					t.Errorf("%s: %s left running", tc.name, name)
				}
			}
		}
		var text bytes.Buffer
		r.WriteText(&text)
		if tc.escaped > 0 && !strings.Contains(text.String(), "ESCAPED") {
			t.Errorf("%s: the text does not say ESCAPED:\n%s", tc.name, text.String())
		}
		if _, err := json.Marshal(r); err != nil {
			t.Error(err)
		}
	}

	// A unit that ends without answering is an agent not audited.
	u := units.NewFake()
	h := fakeHost(t, u, refuseAll, nil)
	h.ReadOutput = func(string) ([]byte, error) { return nil, nil }
	h.Units = stoppedAfterStart{u}
	r := Run(context.Background(), h, f, []int{1}, colluder)
	if r.Errors != 1 || !r.Failing() || !strings.Contains(r.Agents[0].Error, "ended without answering") {
		t.Errorf("a silent unit: %+v", r)
	}
}

// stoppedAfterStart is systemd where the audit unit exits at once.
type stoppedAfterStart struct{ *units.Fake }

func (s stoppedAfterStart) Start(ctx context.Context, u units.Unit) error {
	s.Fake.Start(ctx, u)
	s.Fake.Fail(u.Name)
	return nil
}

// The text report of a fixed Report: every result, a drift, an agent not
// audited.
func TestWriteTextGolden(t *testing.T) {
	score := 1.3
	r := Report{Agents: []AgentReport{{
		Agent: 1, Level: "process", Peer: 2, Unit: "flock-audit@1.service", Elapsed: 812, AsLive: []string{"ProtectSystem", "ProtectProc"},
		Probes: []Outcome{
			{Probe: "read another agent's file", Category: "files", Result: Blocked, Detail: "open /srv/flock/agents/2/.flock-audit-read: no such file or directory", Control: "flock audit canary of agent 2"},
			{Probe: "connect to a loopback port other than the bus", Category: "network", Result: Escaped, Detail: `connected, echo "flock-collude:ping"`, Control: "connected"},
			{Probe: "connect to a host abstract UNIX socket", Category: "ipc", Result: Open, Detail: "connected", Known: "no Landlock IPC scope"},
			{Probe: "set the clock", Category: "kernel", Result: Unproven, Detail: "clock_settime: operation not permitted", Control: "failed: clock_settime: operation not permitted"},
			{Probe: "connect to podman's socket", Category: "ipc", Result: Absent, Detail: "no such file", Control: "failed: no such file"},
			{Probe: "send secret github's placeholder to another name on api.github.com:443's connection", Category: "secrets", Result: Blocked,
				Detail:  "421 Misdirected Request: flock proxy: agent 1: refused: a request for flock-audit.invalid on a connection to api.github.com:443; open a connection to that host",
				Control: "carried upstream: 404 Not Found: {\"message\":\"Not Found\"}"},
		},
		Drift:    []explain.Drift{{Kind: "path", What: "/srv/flock/agents/2 mode", Want: "0700", Have: "0755"}},
		Exposure: explain.Exposure{Score: &score, Rating: "OK"},
		Open:     []sandbox.Gap{{Wall: "abstract UNIX sockets", Why: "no Landlock IPC scope"}},
	}, {Agent: 2, Level: "gvisor", Peer: 1, Unit: "flock-audit@2.service", Error: "flock-audit@2.service did not answer within 30s", Exposure: explain.Exposure{Unavailable: "systemd-analyze: not found"}}},
		Probes: 6, Escaped: 1, Unproven: 1, Drift: 1, Errors: 1, Elapsed: 2100}
	var b bytes.Buffer
	r.WriteText(&b)
	golden.Check(t, "testdata/report.golden", b.String())
}

// With a peer serving, every channel probe aims at the peer's channel and
// its control at root's; without one, both at root's.
func TestPlanAimsAtThePeersChannels(t *testing.T) {
	f := testFlock(t, twoAgents)
	peer := PeerColluder(colluder, 2)
	peer.TCPPort, peer.UDPPort = 5000, 5001
	with := Plan(f, f.Agents[0], Target{Peer: 2, Channels: &peer}, colluder)
	without := Plan(f, f.Agents[0], Target{Peer: 2}, colluder)
	// One more with a peer: the host's own loopback service, at root's port.
	host := slices.IndexFunc(with, func(p Probe) bool { return p.Name == "connect to a host service on loopback" })
	if host < 0 || with[host].Req.Addr != "127.0.0.1:"+strconv.Itoa(colluder.TCPPort) {
		t.Fatalf("no probe of the host's loopback service at root's port")
	}
	with = slices.Delete(with, host, host+1)
	if len(with) != len(without) {
		t.Fatalf("%d probes with a peer, %d without", len(with), len(without))
	}
	channels := 0
	for i, p := range with {
		if p.Category != "ipc" && p.Category != "network" || p.Req.Op == "raw-socket" || p.Req.Op == "packet-socket" || p.Req.Op == "netlink-route" || p.Optional && p.Req.Op == "connect-unix" {
			continue
		}
		channels++
		q := without[i]
		if !reflect.DeepEqual(p.Control, q.Control) || !reflect.DeepEqual(q.Req, q.Control) {
			t.Errorf("%q: control %+v (without a peer %+v, its request %+v); want root's", p.Name, p.Control, q.Control, q.Req)
		}
		if reflect.DeepEqual(p.Req, p.Control) || !strings.Contains(p.Req.Addr+p.Req.Path+p.Req.Name+strconv.Itoa(p.Req.Key), "peer-2") &&
			p.Req.Key != peer.MsgKey && p.Req.Key != peer.ShmKey && !strings.HasSuffix(p.Req.Addr, ":5000") && !strings.HasSuffix(p.Req.Addr, ":5001") {
			t.Errorf("%q aims at %+v; want the peer's channel", p.Name, p.Req)
		}
		if !strings.Contains(p.Name, "another agent's") || strings.Contains(q.Name, "another agent's") {
			t.Errorf("names %q / %q: say whose channel", p.Name, q.Name)
		}
	}
	if channels != 11 {
		t.Errorf("%d channel probes; want 11 (5 IPC, 2 files, 4 network)", channels)
	}
}

// What opens a colluder's channels and what reads their ports are one
// pair; a channel the peer could not open is reported, and its probe aims
// at root's channel instead.
func TestColluderOpened(t *testing.T) {
	c := PeerColluder(NewColluder("flock-audit-7", 7), 3)
	if c.Abstract != "@flock-audit-7-peer-3" || c.MsgKey == NewColluder("flock-audit-7", 7).MsgKey {
		t.Errorf("peer colluder %+v", c)
	}
	rs := make([]probe.Result, len(c.Opens()))
	for i := range rs {
		rs[i] = probe.Result{OK: true, Detail: "x"}
	}
	rs[0].Detail, rs[1].Detail = "[::]:4100", "127.0.0.1:4101"
	got, failed, err := c.Opened(rs)
	if err != nil || len(failed) > 0 || got.TCPPort != 4100 || got.UDPPort != 4101 || got.MQName != c.MQName {
		t.Errorf("opened %+v, %v, %v", got, failed, err)
	}
	rs[4] = probe.Result{Err: "no space left on device"}
	rs[6] = probe.Result{Err: "function not implemented"}
	got, failed, err = c.Opened(rs)
	if err != nil || len(failed) != 2 || !strings.Contains(failed[0], "msg-create 0x46500003: no space left") || got.MsgKey != 0 || got.MQName != "" || got.ShmKey == 0 {
		t.Errorf("two channels not opened: %+v, %q, %v", got, failed, err)
	}
	if _, _, err := c.Opened(rs[:3]); err == nil {
		t.Error("3 answers for all channels: no error")
	}

	f := testFlock(t, twoAgents)
	u := units.NewFake()
	h := fakeHost(t, u, func(probe.Request) probe.Result { return probe.Result{Err: "denied"} }, nil)
	read := h.ReadOutput
	h.ReadOutput = func(p string) ([]byte, error) {
		data, err := read(p)
		if strings.HasSuffix(p, "-peer.json") {
			b, _ := probe.Decode(data, true)
			b.Results[2] = probe.Result{Err: "address in use"}
			data = b.Encode()
		}
		return data, err
	}
	r := Run(context.Background(), h, f, []int{1}, colluder)
	a := r.Agents[0]
	if r.Errors != 0 || len(a.PeerUnopened) != 1 || !strings.Contains(a.PeerUnopened[0], "listen-unix @x-peer-2: address in use") {
		t.Errorf("a peer that could not open its abstract socket: %+v", a)
	}
	for _, o := range a.Probes {
		if strings.Contains(o.Probe, "abstract") && o.Probe != "connect to the host's abstract UNIX socket" {
			t.Errorf("the peer has no abstract socket; probe %q", o.Probe)
		}
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if !strings.Contains(text.String(), "the peer could not open (its probe aims at the host's): listen-unix @x-peer-2") {
		t.Errorf("the text does not say what the peer could not open:\n%s", text.String())
	}
}

// The audit probes the walls the agent's unit has in force: a unit
// restarted without ProtectSystem is probed without it. When systemd
// refuses the live walls, or the agent's unit cannot be read, it probes
// the planned ones and says so.
func TestRunProbesTheLiveWalls(t *testing.T) {
	f := testFlock(t, twoAgents)
	refuseAll := func(probe.Request) probe.Result { return probe.Result{Err: "permission denied"} }
	for _, tc := range []struct {
		name          string
		agentUnit     bool
		refuseLive    bool
		protectSystem string
		asLive        []string
		note          string
	}{
		{"the live unit's walls", true, false, "no", []string{"ProtectSystem"}, ""},
		{"systemd refuses them", true, true, "strict", nil, "systemd refused the live unit's [ProtectSystem]"},
		{"no unit to read", false, false, "strict", nil, "the agent's unit could not be read"},
	} {
		fake := units.NewFake()
		if tc.agentUnit {
			fake.Start(context.Background(), units.ForAgent(f, f.Agents[0], units.Options{SystemdVersion: 254}))
			fake.SetProperty(spec.UnitName(1), "ProtectSystem", "no")
		}
		rec := &recordingStart{Fake: fake, refuseLive: tc.refuseLive}
		h := fakeHost(t, fake, refuseAll, nil)
		h.Units = rec
		r := Run(context.Background(), h, f, []int{1}, colluder)
		a := r.Agents[0]
		if !slices.Equal(a.AsLive, tc.asLive) {
			t.Errorf("%s: as live %v, want %v", tc.name, a.AsLive, tc.asLive)
		}
		noted := strings.Join(a.Unread, "; ")
		if (tc.note == "") != !strings.Contains(noted, "planned walls") || !strings.Contains(noted, tc.note) {
			t.Errorf("%s: unread %q, want a note %q", tc.name, noted, tc.note)
		}
		if got := rec.protectSystem[units.AuditUnit(1)]; got != tc.protectSystem {
			t.Errorf("%s: the audit unit ran with ProtectSystem=%q, want %q", tc.name, got, tc.protectSystem)
		}
		if a.Error != "" || r.Probes == 0 {
			t.Errorf("%s: %d probes, error %q", tc.name, r.Probes, a.Error)
		}
	}
}

// recordingStart is systemd that keeps the ProtectSystem of each unit
// it started last, and refuses ProtectSystem=no when refuseLive.
type recordingStart struct {
	*units.Fake
	refuseLive    bool
	mu            sync.Mutex
	protectSystem map[string]string
}

func (r *recordingStart) Start(ctx context.Context, u units.Unit) error {
	var ps string
	for _, p := range u.Properties {
		if p.Name == "ProtectSystem" {
			ps, _ = p.Value.(string)
		}
	}
	if r.refuseLive && ps == "no" {
		return errors.New("Invalid argument")
	}
	r.mu.Lock()
	if r.protectSystem == nil {
		r.protectSystem = map[string]string{}
	}
	r.protectSystem[u.Name] = ps
	r.mu.Unlock()
	return r.Fake.Start(ctx, u)
}
