package spec

// Tier: unit (no root).

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMinimalSpecGetsEveryDefault(t *testing.T) {
	f, err := Parse([]byte("agents:\n  - id: 3\n  - id: 1\n  - id: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Flock{
		Root:    "/srv/flock",
		UIDBase: 2000000000,
		Bus: Bus{Host: "127.0.0.1", Port: 4222, MonitorHost: "127.0.0.1", MonitorPort: 8222, MetricsHost: "127.0.0.1", MetricsPort: 8223, StoreMax: 1 << 30, MaxDeliveries: 5,
			MaxSubscriptions: 512, MaxPending: 16 << 20, SendRate: 16 << 20, ConnectRate: 20},
	}
	for _, id := range []int{1, 2, 3} {
		want.Agents = append(want.Agents, Agent{
			ID: id, Role: RoleWorker, Level: LevelProcess, Common: AccessRO,
			Limits:      Limits{MemoryBytes: 256 << 20, CPUPercent: 50, Tasks: 50},
			TaskTimeout: 5 * time.Minute, MaxOutput: 256 << 10, Heartbeat: 30 * time.Second,
			Shares: Shares{Connections: 8, Tasks: 10000, TaskBytes: 64 << 20, Tunnels: 16, Handshakes: 8},
		})
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("got  %+v\nwant %+v", f, want)
	}
	if f.UID(3) != 2000000003 || f.AgentDir(3) != "/srv/flock/agents/3" || f.LogPath(3) != "/srv/flock/logs/3.log" {
		t.Errorf("uid/dir/log of agent 3: %d %s %s", f.UID(3), f.AgentDir(3), f.LogPath(3))
	}
	if f.Bus.URL() != "nats://127.0.0.1:4222" {
		t.Errorf("bus url %s", f.Bus.URL())
	}
}

func TestCountFormEqualsTheList(t *testing.T) {
	byCount, err := Parse([]byte("agents: {count: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	byList, err := Parse([]byte("agents: [{id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	byFlag, err := Count(5)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byCount, byList) || !reflect.DeepEqual(byFlag, byList) {
		t.Errorf("count form %+v\nflag %+v\nlist form %+v", byCount, byFlag, byList)
	}
}

func TestEveryFieldIsRead(t *testing.T) {
	f, err := Parse([]byte(`
root: /var/lib/agents
uid_base: 3000000000
bus:
  listen: "[::1]:4333"
  monitor: "127.0.0.1:9333"
  metrics: "[::1]:9334"
  store_max: 2G
  max_deliveries: 3
  sync: 250ms
  max_subscriptions: 100
  max_pending: 9M
  send_rate: 4M
  connect_rate: 5
defaults:
  limits: {memory: 1G, tasks: 80}
  shares: {connections: 4, tunnels: 8}
  egress: ["10.0.0.0/8:*"]
  heartbeat: 10s
  env: {LOG_LEVEL: info, REGION: eu}
agents:
  - id: 7
    role: orchestrator
    exec: ["/usr/bin/python3", "agent.py", "--verbose"]
    limits: {memory: 512M, cpu: 200%}
    common: rw
    egress: ["10.1.2.3:443", "192.0.2.0/24:53/udp", "[2001:db8::1]:443"]
    subjects: {publish: ["reports.>"], subscribe: ["reports.*.done"]}
    shares: {tasks: 500, task_bytes: 16M, handshakes: 2}
    env: {LOG_LEVEL: debug, PORT: 8080}
  - id: 8
    role: monitor
  - id: 9
    command: [/usr/bin/tr, a-z, A-Z]
    task_timeout: 90s
    max_output: 64K
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Root != "/var/lib/agents" || f.UIDBase != 3000000000 || f.Bus != (Bus{"::1", 4333, "127.0.0.1", 9333, "::1", 9334, 2 << 30, 3, 0, 250 * time.Millisecond, 100, 9 << 20, 4 << 20, 5}) {
		t.Errorf("top level: %+v", f)
	}
	if f.Bus.URL() != "nats://[::1]:4333" {
		t.Errorf("bus url %s", f.Bus.URL())
	}
	a7, _ := f.Agent(7)
	want7 := Agent{
		ID: 7, Role: RoleOrchestrator, Level: LevelProcess, Common: AccessRW,
		Exec:        []string{"/usr/bin/python3", "agent.py", "--verbose"},
		Limits:      Limits{MemoryBytes: 512 << 20, CPUPercent: 200, Tasks: 80},
		TaskTimeout: 5 * time.Minute, MaxOutput: 256 << 10, Heartbeat: 10 * time.Second,
		Subjects: Subjects{Publish: []string{"reports.>"}, Subscribe: []string{"reports.*.done"}},
		Egress: []Egress{
			{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Port: 443, Proto: "tcp"},
			{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Port: 53, Proto: "udp"},
			{Prefix: netip.MustParsePrefix("2001:db8::1/128"), Port: 443, Proto: "tcp"},
		},
		Env:    map[string]string{"LOG_LEVEL": "debug", "PORT": "8080", "REGION": "eu"},
		Shares: Shares{Connections: 4, Tasks: 500, TaskBytes: 16 << 20, Tunnels: 8, Handshakes: 2},
	}
	if !reflect.DeepEqual(a7, want7) {
		t.Errorf("agent 7:\n got %+v\nwant %+v", a7, want7)
	}
	a8, _ := f.Agent(8)
	want8 := Agent{
		ID: 8, Role: RoleMonitor, Level: LevelProcess, Common: AccessRO,
		Limits:      Limits{MemoryBytes: 1 << 30, CPUPercent: 50, Tasks: 80},
		TaskTimeout: 5 * time.Minute, MaxOutput: 256 << 10, Heartbeat: 10 * time.Second,
		Egress: []Egress{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 0, Proto: "tcp"}},
		Env:    map[string]string{"LOG_LEVEL": "info", "REGION": "eu"},
		Shares: Shares{Connections: 4, Tasks: DefaultTaskShare, TaskBytes: DefaultTaskBytes, Tunnels: 8, Handshakes: DefaultHandshakes},
	}
	if !reflect.DeepEqual(a8, want8) {
		t.Errorf("agent 8 (defaults):\n got %+v\nwant %+v", a8, want8)
	}
	a9, _ := f.Agent(9)
	if !reflect.DeepEqual(a9.Command, []string{"/usr/bin/tr", "a-z", "A-Z"}) || a9.TaskTimeout != 90*time.Second || a9.MaxOutput != 64<<10 || a9.Role != RoleWorker {
		t.Errorf("agent 9: %+v", a9)
	}
}

// BadSpecDir holds the corpus of bad specs: NAME.yaml is refused with
// exactly the lines of NAME.err, in document order. The system tests feed
// the same files to flockctl and check that the host does not change.
const badSpecDir = "testdata/bad"

type badSpec struct {
	name, yaml string
	want       []string
}

func badSpecs(t testing.TB) []badSpec {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(badSpecDir, "*.yaml"))
	if err != nil || len(files) < 50 {
		t.Fatalf("the bad-spec corpus %s has %d specs (%v), want at least 50", badSpecDir, len(files), err)
	}
	var out []badSpec
	for _, f := range files {
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
		if err != nil {
			t.Fatalf("%s has no expected error: %v", f, err)
		}
		out = append(out, badSpec{filepath.Base(f), string(y), strings.Split(strings.TrimSuffix(string(e), "\n"), "\n")})
	}
	return out
}

func TestBadSpecsNameTheFieldAndTheFix(t *testing.T) {
	for _, tc := range badSpecs(t) {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			if f != nil {
				t.Errorf("returned a flock with the error: %+v", f)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("error:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "flock.yaml")
	if err := os.WriteFile(p, []byte("agents:\n  - id: 1\n    limits: {memory: \"256 MB\"}\n  - id: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	want := p + `: agents[0].limits.memory: "256 MB" is not a size; write 256M` + "\n" +
		p + `: agents[1].id: 1 is already the id of agents[0]; give every agent its own id`
	if err == nil || err.Error() != want {
		t.Errorf("Load error:\n got %v\nwant %s", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "agents[0].limits.memory" {
		t.Errorf("errors.As FieldError: %+v", fe)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading the spec") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCountBounds(t *testing.T) {
	for _, n := range []int{0, -1, MaxID + 1} {
		if _, err := Count(n); err == nil || !strings.HasPrefix(err.Error(), "--agents") {
			t.Errorf("Count(%d) = %v, want an --agents error", n, err)
		}
	}
}

// FuzzParse: no input makes Parse panic, and whatever it accepts is a
// flock every later step can trust.
func FuzzParse(f *testing.F) {
	for _, tc := range badSpecs(f) {
		f.Add([]byte(tc.yaml))
	}
	f.Add([]byte("agents: {count: 3, role: monitor, limits: {memory: 64M}}\n"))
	f.Add([]byte("hosts: [{name: a, address: 10.0.0.1}, {name: b, address: \"fd00::2\"}]\nbus: {cluster_port: 7222}\ndefaults: {host: a}\nagents: [{id: 1}, {id: 2, host: b}]\n"))
	f.Add([]byte("root: /opt/f\nbus: {listen: \"[::1]:1\"}\nagents: [{id: 2, egress: [\"[::/0]:*/udp\"], command: [a]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			return
		}
		if len(fl.Agents) == 0 {
			t.Fatal("accepted a flock without agents")
		}
		for i, a := range fl.Agents {
			if a.ID < 1 || a.ID > MaxID || (i > 0 && a.ID <= fl.Agents[i-1].ID) {
				t.Fatalf("agent ids not positive, unique and sorted: %+v", fl.Agents)
			}
			if a.Limits.MemoryBytes < MinMemory || a.Limits.CPUPercent < 1 || a.Limits.Tasks < 1 {
				t.Fatalf("agent %d limits %+v", a.ID, a.Limits)
			}
		}
		for _, a := range fl.Agents {
			if _, ok := fl.HostNamed(a.Host); ok != fl.Clustered() || (!ok && a.Host != "") {
				t.Fatalf("agent %d on host %q of %+v", a.ID, a.Host, fl.Hosts)
			}
		}
		if !strings.HasPrefix(fl.Root, "/") || fl.UIDBase < MinUIDBase {
			t.Fatalf("root %q uid_base %d", fl.Root, fl.UIDBase)
		}
	})
}

// Tier: unit. Every spec under examples/ parses, as an operator copies it.
func TestExampleSpecsParse(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.yaml")
	more, _ := filepath.Glob("../examples/*/flock.yaml")
	paths = append(paths, more...)
	if len(paths) < 3 {
		t.Fatalf("found only %v", paths)
	}
	for _, p := range paths {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// Tier: unit. bus.sync: absent and always are the safe default, an
// interval is read as one.
func TestBusSync(t *testing.T) {
	for _, tc := range []struct {
		bus  string
		want time.Duration
	}{{"{}", SyncAlways}, {"{sync: always}", SyncAlways}, {"{sync: 1s}", time.Second}, {"{sync: 2m}", MaxSync}} {
		f, err := Parse([]byte("bus: " + tc.bus + "\nagents: [{id: 1}]\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.bus, err)
		}
		if f.Bus.Sync != tc.want {
			t.Errorf("bus: %s: sync %s, want %s", tc.bus, f.Bus.Sync, tc.want)
		}
	}
}
