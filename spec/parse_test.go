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
		Bus:     Bus{Host: "127.0.0.1", Port: 4222, MonitorHost: "127.0.0.1", MonitorPort: 8222},
	}
	for _, id := range []int{1, 2, 3} {
		want.Agents = append(want.Agents, Agent{
			ID: id, Role: RoleWorker, Level: LevelProcess, Common: AccessRO,
			Limits:      Limits{MemoryBytes: 256 << 20, CPUPercent: 50, Tasks: 50},
			TaskTimeout: 5 * time.Minute, MaxOutput: 256 << 10, Heartbeat: 30 * time.Second,
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
defaults:
  limits: {memory: 1G, tasks: 80}
  egress: ["10.0.0.0/8:*"]
  heartbeat: 10s
agents:
  - id: 7
    role: orchestrator
    exec: ["/usr/bin/python3", "agent.py", "--verbose"]
    limits: {memory: 512M, cpu: 200%}
    common: rw
    egress: ["10.1.2.3:443", "192.0.2.0/24:53/udp", "[2001:db8::1]:443"]
    subjects: {publish: ["reports.>"], subscribe: ["reports.*.done"]}
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
	if f.Root != "/var/lib/agents" || f.UIDBase != 3000000000 || f.Bus != (Bus{"::1", 4333, "127.0.0.1", 9333}) {
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
			{netip.MustParsePrefix("10.1.2.3/32"), 443, "tcp"},
			{netip.MustParsePrefix("192.0.2.0/24"), 53, "udp"},
			{netip.MustParsePrefix("2001:db8::1/128"), 443, "tcp"},
		},
	}
	if !reflect.DeepEqual(a7, want7) {
		t.Errorf("agent 7:\n got %+v\nwant %+v", a7, want7)
	}
	a8, _ := f.Agent(8)
	want8 := Agent{
		ID: 8, Role: RoleMonitor, Level: LevelProcess, Common: AccessRO,
		Limits:      Limits{MemoryBytes: 1 << 30, CPUPercent: 50, Tasks: 80},
		TaskTimeout: 5 * time.Minute, MaxOutput: 256 << 10, Heartbeat: 10 * time.Second,
		Egress: []Egress{{netip.MustParsePrefix("10.0.0.0/8"), 0, "tcp"}},
	}
	if !reflect.DeepEqual(a8, want8) {
		t.Errorf("agent 8 (defaults):\n got %+v\nwant %+v", a8, want8)
	}
	a9, _ := f.Agent(9)
	if !reflect.DeepEqual(a9.Command, []string{"/usr/bin/tr", "a-z", "A-Z"}) || a9.TaskTimeout != 90*time.Second || a9.MaxOutput != 64<<10 || a9.Role != RoleWorker {
		t.Errorf("agent 9: %+v", a9)
	}
}

func TestEgressRoundTrips(t *testing.T) {
	for _, s := range []string{"10.1.2.3:443/tcp", "192.0.2.0/24:53/udp", "[2001:db8::1]:443/tcp", "[2001:db8::/32]:*/udp"} {
		e, err := ParseEgress(s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if e.String() != s {
			t.Errorf("ParseEgress(%q).String() = %q", s, e.String())
		}
	}
}

// badSpecs: each is refused with exactly these lines, in document order.
var badSpecs = []struct {
	name, yaml string
	want       []string
}{
	{"empty file", "", []string{`agents: missing; list the agents (agents: [{id: 1}, {id: 2}]) or give a count (agents: {count: 3})`}},
	{"no agents", "root: /srv/flock\n", []string{`agents: missing; list the agents (agents: [{id: 1}, {id: 2}]) or give a count (agents: {count: 3})`}},
	{"empty list", "agents: []\n", []string{`agents: is empty; list at least one agent (- id: 1)`}},
	{"agents a string", "agents: three\n", []string{`agents: is "three"; list the agents (- id: 1) or give a count (agents: {count: 3})`}},
	{"not yaml", "agents: [\n", []string{`not valid YAML: line 1: did not find expected node content`}},
	{"two documents", "agents: [{id: 1}]\n---\nagents: [{id: 2}]\n", []string{`holds more than one YAML document; put the whole flock in one`}},
	{"top level a list", "- id: 1\n", []string{`is a list; write a mapping of root, uid_base, bus, defaults, agents`}},
	{"unknown top field", "agent:\n  - id: 1\nagents: [{id: 1}]\n", []string{`unknown field "agent"; known fields are root, uid_base, bus, defaults, agents`}},
	{"unknown agent field", "agents:\n  - id: 1\n    colour: blue\n", []string{`agents[0]: unknown field "colour"; known fields are id, role, level, command, exec, task_timeout, max_output, heartbeat, limits, common, egress, subjects`}},
	{"missing id", "agents:\n  - role: worker\n", []string{`agents[0].id: missing; every agent needs an id, e.g. - id: 1`}},
	{"zero id", "agents:\n  - id: 0\n", []string{`agents[0].id: 0 is not a positive id; agent ids start at 1`}},
	{"negative id", "agents:\n  - id: 1\n  - id: -4\n", []string{`agents[1].id: -4 is not a positive id; agent ids start at 1`}},
	{"id too large", "agents:\n  - id: 70000\n", []string{`agents[0].id: 70000 is out of range; write an agent id from 1 to 65535`}},
	{"id a string", "agents:\n  - id: one\n", []string{`agents[0].id: "one" is not a whole number; write an agent id from 1 to 65535`}},
	{"duplicate id", "agents:\n  - id: 1\n  - id: 2\n  - id: 1\n", []string{`agents[2].id: 1 is already the id of agents[0]; give every agent its own id`}},
	{"bad size", "agents:\n  - id: 1\n  - id: 2\n  - id: 3\n    limits: {memory: \"256 MB\"}\n", []string{`agents[2].limits.memory: "256 MB" is not a size; write 256M`}},
	{"lower-case size", "agents:\n  - id: 1\n    limits: {memory: 512m}\n", []string{`agents[0].limits.memory: "512m" is not a size; write 512M`}},
	{"fractional size", "agents:\n  - id: 1\n    limits: {memory: 1.5G}\n", []string{`agents[0].limits.memory: "1.5G" is not a size; write a whole number of bytes, or of K, M, G or T (1024-based), e.g. 256M`}},
	{"tiny memory", "agents:\n  - id: 1\n    limits: {memory: 4M}\n", []string{`agents[0].limits.memory: 4M is too little for an agent; give at least 16M`}},
	{"cpu without %", "agents:\n  - id: 1\n    limits: {cpu: 50}\n", []string{`agents[0].limits.cpu: "50" is not a CPU share; write 50%`}},
	{"cpu words", "agents:\n  - id: 1\n    limits: {cpu: half}\n", []string{`agents[0].limits.cpu: "half" is not a CPU share; write a percentage of one CPU, e.g. 50% (200% is two CPUs)`}},
	{"cpu zero", "agents:\n  - id: 1\n    limits: {cpu: 0%}\n", []string{`agents[0].limits.cpu: 0% is out of range; write from 1% to 100000%`}},
	{"tasks zero", "agents:\n  - id: 1\n    limits: {tasks: 0}\n", []string{`agents[0].limits.tasks: 0 is out of range; write a number of processes and threads from 1 to 4194304`}},
	{"unknown limit", "agents:\n  - id: 1\n    limits: {disk: 1G}\n", []string{`agents[0].limits: unknown field "disk"; known fields are memory, cpu, tasks`}},
	{"unknown role", "agents:\n  - id: 1\n    role: boss\n", []string{`agents[0].role: "boss" is not a role; choose orchestrator, worker or monitor`}},
	{"unknown level", "agents:\n  - id: 1\n    level: vm\n", []string{`agents[0].level: "vm" is not a level; choose process, podman or gvisor`}},
	{"podman not yet", "agents:\n  - id: 1\n    level: podman\n", []string{`agents[0].level: podman is not yet supported by this flockctl (it is planned); use level: process`}},
	{"bad common", "agents:\n  - id: 1\n    common: write\n", []string{`agents[0].common: "write" is not an access; choose ro (read-only, the default) or rw`}},
	{"command a string", "agents:\n  - id: 1\n    command: python3 agent.py\n", []string{`agents[0].command: "python3 agent.py" is a string; write the command as an argv list, e.g. ["/usr/bin/python3", "agent.py"]`}},
	{"command empty", "agents:\n  - id: 1\n    command: []\n", []string{`agents[0].command: is empty; give run per task as an argv list such as ["/usr/bin/python3", "agent.py"], or leave it out to run flock-agent's own program`}},
	{"command item a list", "agents:\n  - id: 1\n    command: [python3, [a]]\n", []string{`agents[0].command[1]: is a list; each item is a string, e.g. ["/usr/bin/python3", "agent.py"]`}},
	{"egress host name", "agents:\n  - id: 1\n    egress: [\"example.com:443\"]\n", []string{`agents[0].egress[0]: "example.com:443" is not an address (host names are not resolved); write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443`}},
	{"egress no port", "agents:\n  - id: 1\n    egress: [\"10.1.2.3\"]\n", []string{`agents[0].egress[0]: "10.1.2.3" has no port; write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443`}},
	{"egress bad proto", "agents:\n  - id: 1\n    egress: [\"10.1.2.3:443/icmp\"]\n", []string{`agents[0].egress[0]: "10.1.2.3:443/icmp" has protocol "icmp", not tcp or udp; write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443`}},
	{"egress host bits", "agents:\n  - id: 1\n    egress: [\"10.1.2.3/24:443\"]\n", []string{`agents[0].egress[0]: "10.1.2.3/24:443" has host bits set in its CIDR; write 10.1.2.0/24; write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443`}},
	{"egress v6 unbracketed", "agents:\n  - id: 1\n    egress: [\"2001:db8::1:443\"]\n", []string{`agents[0].egress[0]: "2001:db8::1:443" is an IPv6 address without brackets; write an address or CIDR with a port, e.g. 10.1.2.3:443, 192.0.2.0/24:53/udp or [2001:db8::1]:443`}},
	{"egress a string", "agents:\n  - id: 1\n    egress: \"10.1.2.3:443\"\n", []string{`agents[0].egress: is "10.1.2.3:443"; write a list, e.g. ["10.1.2.3:443", "192.0.2.0/24:53/udp"]`}},
	{"relative root", "root: srv/flock\nagents: [{id: 1}]\n", []string{`root: "srv/flock" is not an absolute path; write e.g. /srv/flock`}},
	{"system root", "root: /etc/flock\nagents: [{id: 1}]\n", []string{`root: "/etc/flock" is a system directory; give flock a directory of its own, e.g. /srv/flock`}},
	{"root in state dir", "root: /var/lib/flock/agents\nagents: [{id: 1}]\n", []string{`root: "/var/lib/flock/agents" is inside /var/lib/flock, flock's own state (hidden from agents); choose e.g. /srv/flock`}},
	{"unclean root", "root: /srv/flock/\nagents: [{id: 1}]\n", []string{`root: "/srv/flock/" is not a clean path; write /srv/flock`}},
	{"root with space", "root: /srv/my flock\nagents: [{id: 1}]\n", []string{`root: "/srv/my flock" has a space, quote, backslash, % or $ that unit files would misread; choose a plain path, e.g. /srv/flock`}},
	{"uid base too low", "uid_base: 1000\nagents: [{id: 1}]\n", []string{`uid_base: 1000 is out of range; write a uid from 65536 to 4294901758`}},
	{"bus not loopback", "bus: {listen: \"0.0.0.0:4222\"}\nagents: [{id: 1}]\n", []string{`bus.listen: "0.0.0.0:4222" is not a loopback address; the bus listens on loopback only, e.g. 127.0.0.1:4222`}},
	{"bus no port", "bus: {listen: \"127.0.0.1\"}\nagents: [{id: 1}]\n", []string{`bus.listen: "127.0.0.1" is not an address and port; write e.g. 127.0.0.1:4222`}},
	{"unknown bus field", "bus: {port: 4222}\nagents: [{id: 1}]\n", []string{`bus: unknown field "port"; known fields are listen, monitor`}},
	{"monitor not loopback", "bus: {monitor: \"10.0.0.1:8222\"}\nagents: [{id: 1}]\n", []string{`bus.monitor: "10.0.0.1:8222" is not a loopback address; the bus listens on loopback only, e.g. 127.0.0.1:8222 (or off)`}},
	{"monitor on the bus port", "bus: {monitor: \"127.0.0.1:4222\"}\nagents: [{id: 1}]\n", []string{`bus.monitor: 127.0.0.1:4222 is also bus.listen; give the monitoring endpoint its own port, e.g. 127.0.0.1:8222`}},
	{"command and exec", "agents:\n  - id: 1\n    command: [cat]\n    exec: [sleep, inf]\n", []string{`agents[0].command: is given with exec; give command (run once per task) or exec (the agent's own long-running program), not both`}},
	{"command for a monitor", "agents:\n  - id: 1\n    role: monitor\n    command: [cat]\n", []string{`agents[0].command: is for workers, which take tasks; a monitor runs its own program: write exec: ["/usr/bin/python3", "agent.py"]`}},
	{"command via defaults for an orchestrator", "defaults: {command: [cat]}\nagents:\n  - id: 1\n  - id: 2\n    role: orchestrator\n", []string{`agents[1].command: is for workers, which take tasks; an orchestrator runs its own program: write exec: ["/usr/bin/python3", "agent.py"]`}},
	{"exec empty", "agents:\n  - id: 1\n    exec: []\n", []string{`agents[0].exec: is empty; give the agent's own program as an argv list such as ["/usr/bin/python3", "agent.py"], or leave it out to run flock-agent's own program`}},
	{"timeout without unit", "agents:\n  - id: 1\n    task_timeout: 30\n", []string{`agents[0].task_timeout: "30" is not a duration; write e.g. 5m (units: s, m, h)`}},
	{"timeout too long", "agents:\n  - id: 1\n    task_timeout: 48h\n", []string{`agents[0].task_timeout: 48h is out of range; write from 1s to 24h0m0s`}},
	{"heartbeat too fast", "agents:\n  - id: 1\n    heartbeat: 100ms\n", []string{`agents[0].heartbeat: 100ms is out of range; write from 1s to 1h0m0s`}},
	{"max output too big", "agents:\n  - id: 1\n    max_output: 16M\n", []string{`agents[0].max_output: 16M is out of range; write from 1K to 1M (larger results belong in the shared directory)`}},
	{"max output not a size", "agents:\n  - id: 1\n    max_output: lots\n", []string{`agents[0].max_output: "lots" is not a size; write a whole number of bytes, or of K, M, G or T (1024-based), e.g. 256M`}},
	{"subject everything", "agents:\n  - id: 1\n    subjects: {publish: [\">\"]}\n", []string{`agents[0].subjects.publish[0]: ">" would grant every subject, including other agents' names and inboxes; name a subject space, e.g. reports.>`}},
	{"subject another agent", "agents:\n  - id: 1\n    subjects: {publish: [agent.2.events]}\n", []string{`agents[0].subjects.publish[0]: "agent.2.events" is in a space the roles govern (agent.*, _INBOX.*, flock.*, tasks.*, task.*, broadcast); choose another, e.g. reports.>`}},
	{"subject an inbox", "agents:\n  - id: 1\n    subjects: {subscribe: [\"_INBOX.flock-2.>\"]}\n", []string{`agents[0].subjects.subscribe[0]: "_INBOX.flock-2.>" is in a space the roles govern (agent.*, _INBOX.*, flock.*, tasks.*, task.*, broadcast); choose another, e.g. reports.>`}},
	{"subject system", "agents:\n  - id: 1\n    subjects: {subscribe: [\"$SYS.>\"]}\n", []string{`agents[0].subjects.subscribe[0]: "$SYS.>" is a system subject ($...); choose another, e.g. reports.>`}},
	{"subject empty token", "agents:\n  - id: 1\n    subjects: {publish: [reports..x]}\n", []string{`agents[0].subjects.publish[0]: "reports..x" has an empty token; write e.g. reports.daily`}},
	{"subject > inside", "agents:\n  - id: 1\n    subjects: {publish: [reports.>.x]}\n", []string{`agents[0].subjects.publish[0]: "reports.>.x" has > before the end; > matches the rest, so it goes last`}},
	{"subject with space", "agents:\n  - id: 1\n    subjects: {publish: [\"reports daily\"]}\n", []string{`agents[0].subjects.publish[0]: "reports daily" is not a subject; write dot-separated tokens without spaces, e.g. reports.>`}},
	{"subject wildcard in token", "agents:\n  - id: 1\n    subjects: {publish: [\"reports.a*\"]}\n", []string{`agents[0].subjects.publish[0]: "reports.a*" mixes * or > into a token; use them as whole tokens, e.g. reports.*`}},
	{"unknown subjects field", "agents:\n  - id: 1\n    subjects: {pub: [reports.x]}\n", []string{`agents[0].subjects: unknown field "pub"; known fields are publish, subscribe`}},
	{"defaults with id", "defaults: {id: 1}\nagents: [{id: 1}]\n", []string{`defaults: unknown field "id"; known fields are role, level, command, exec, task_timeout, max_output, heartbeat, limits, common, egress, subjects`}},
	{"bad default applies once", "defaults: {role: boss}\nagents: [{id: 1}, {id: 2}]\n", []string{`defaults.role: "boss" is not a role; choose orchestrator, worker or monitor`}},
	{"count zero", "agents: {count: 0}\n", []string{`agents.count: 0 is out of range; write a number of agents from 1 to 65535`}},
	{"count missing", "agents: {role: worker}\n", []string{`agents.count: missing; write agents: {count: 3} for agents 1..3, or list them`}},
	{"count with id", "agents: {count: 3, id: 1}\n", []string{`agents: unknown field "id"; known fields are count, role, level, command, exec, task_timeout, max_output, heartbeat, limits, common, egress, subjects`}},
	{"duplicate key", "agents:\n  - id: 1\n    id: 2\n", []string{`agents[0].id: given twice (lines 2 and 3); keep one`}},
	{"every problem at once", "agents:\n  - id: 0\n    role: boss\n  - id: 2\n    limits: {memory: 1 GB, cpu: lots}\n", []string{
		`agents[0].role: "boss" is not a role; choose orchestrator, worker or monitor`,
		`agents[0].id: 0 is not a positive id; agent ids start at 1`,
		`agents[1].limits.memory: "1 GB" is not a size; write 1G`,
		`agents[1].limits.cpu: "lots" is not a CPU share; write a percentage of one CPU, e.g. 50% (200% is two CPUs)`,
	}},
}

func TestBadSpecsNameTheFieldAndTheFix(t *testing.T) {
	for _, tc := range badSpecs {
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
	for _, tc := range badSpecs {
		f.Add([]byte(tc.yaml))
	}
	f.Add([]byte("agents: {count: 3, role: monitor, limits: {memory: 64M}}\n"))
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
		if !strings.HasPrefix(fl.Root, "/") || fl.UIDBase < MinUIDBase {
			t.Fatalf("root %q uid_base %d", fl.Root, fl.UIDBase)
		}
	})
}
