package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// MinUIDBase keeps agent uids clear of ordinary users and of the ranges
// systemd hands out dynamically (61184-65519).
const MinUIDBase = 65536

// MaxUIDBase keeps uid_base+MaxID below 4294967294 ((uid_t)-2, "nobody" on
// some systems) and (uid_t)-1.
const MaxUIDBase = 4294967293 - MaxID

// MinMemory is the least an agent may be given: flock-agent alone (a Go
// program) needs about 10 MiB.
const MinMemory = 16 << 20

// Load reads and validates the spec at path.
func Load(path string) (*Flock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	f, err := Parse(data)
	var es Errors
	if errors.As(err, &es) {
		return nil, &inFile{path: path, errs: es}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Count is the spec of n default agents, ids 1..n (flockctl --agents N).
func Count(n int) (*Flock, error) {
	if n < 1 || n > MaxID {
		return nil, fmt.Errorf("--agents %d: give a number of agents from 1 to %d", n, MaxID)
	}
	return Parse([]byte(fmt.Sprintf("agents: {count: %d}\n", n)))
}

// Parse decodes a spec strictly, applies the defaults and validates it.
// Every problem found is returned at once, as Errors.
func Parse(data []byte) (*Flock, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, Errors{{Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, Errors{{Msg: "holds more than one YAML document; put the whole flock in one"}}
	}
	w := &walker{}
	f := w.flock(&doc)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return f, nil
}

func (w *walker) flock(doc *yaml.Node) *Flock {
	f := &Flock{Root: DefaultRoot, UIDBase: DefaultUIDBase, Bus: defaultBus()}
	if doc.Kind == 0 || (doc.Kind == yaml.DocumentNode && isNull(doc.Content[0])) {
		w.fail("agents", "missing; list the agents (agents: [{id: 1}, {id: 2}]) or give a count (agents: {count: 3})")
		return f
	}
	top, ok := w.fields(doc.Content[0], "", topKeys...)
	if !ok {
		return f
	}
	if n, ok := top["root"]; ok {
		f.Root = w.root(n)
	}
	if n, ok := top["uid_base"]; ok {
		v, _ := w.integer(n, "uid_base", "a uid", MinUIDBase, MaxUIDBase)
		f.UIDBase = uint32(v)
	}
	if n, ok := top["bus"]; ok {
		f.Bus = w.bus(n, "bus")
	}
	// Before the agents: each agent's host must be one of them.
	if n, ok := top["hosts"]; ok {
		f.Hosts = w.hosts(n, "hosts")
	}
	// Before the agents too: each grant must name one of them.
	if n, ok := top["providers"]; ok {
		f.Providers = w.providers(n, "providers", f.Root)
	}
	if n, ok := top["secrets"]; ok {
		f.Secrets = w.secrets(n, "secrets", f.Root)
		w.secretList = f.Secrets
	}
	defaults := builtinDefaults()
	if n, ok := top["defaults"]; ok {
		if fs, ok := w.fields(n, "defaults", defaultKeys...); ok {
			defaults = w.agentFields(fs, "defaults", defaults)
		}
	}
	n, ok := top["agents"]
	if !ok || isNull(n) {
		w.fail("agents", "missing; list the agents (agents: [{id: 1}, {id: 2}]) or give a count (agents: {count: 3})")
		return f
	}
	f.Agents = w.agents(n, defaults)
	if n, ok := top["budgets"]; ok {
		f.Budgets = w.budgets(n, "budgets", f.Agents)
	}
	w.settle(f)
	w.shareTotals(f)
	return f
}

func defaultBus() Bus {
	return Bus{Host: DefaultBusHost, Port: DefaultBusPort, MonitorHost: DefaultBusHost, MonitorPort: DefaultMonitor,
		MetricsHost: DefaultBusHost, MetricsPort: DefaultMetrics,
		StoreMax: DefaultStoreMax, MaxDeliveries: DefaultMaxDeliveries,
		MaxSubscriptions: DefaultMaxSubscriptions, MaxPending: DefaultMaxPending, SendRate: DefaultSendRate, ConnectRate: DefaultConnectRate}
}

func builtinDefaults() Agent {
	return Agent{
		Role:        RoleWorker,
		Level:       LevelProcess,
		Limits:      Limits{MemoryBytes: DefaultMemory, CPUPercent: DefaultCPUPercent, Tasks: DefaultTasks},
		Common:      AccessRO,
		TaskTimeout: DefaultTimeout,
		MaxOutput:   DefaultMaxOutput,
		Heartbeat:   DefaultHeartbeat,
		Shares:      defaultShares(),
	}
}

func (w *walker) root(n *yaml.Node) string {
	s, ok := w.str(n, "root", DefaultRoot)
	if !ok {
		return DefaultRoot
	}
	switch {
	case !filepath.IsAbs(s):
		w.fail("root", "%q is not an absolute path; write e.g. %s", s, DefaultRoot)
	case filepath.Clean(s) != s:
		w.fail("root", "%q is not a clean path; write %s", s, filepath.Clean(s))
	case s == StateDir || strings.HasPrefix(s, StateDir+"/"):
		w.fail("root", "%q is inside %s, flock's own state (hidden from agents); choose e.g. %s", s, StateDir, DefaultRoot)
	case s == "/" || underSystemDir(s):
		w.fail("root", "%q is a system directory; give flock a directory of its own, e.g. %s", s, DefaultRoot)
	case strings.ContainsAny(s, " \t\n\\%$\"'"):
		w.fail("root", "%q has a space, quote, backslash, %% or $ that unit files would misread; choose a plain path, e.g. %s", s, DefaultRoot)
	}
	return s
}

// underSystemDir reports whether p is, or is inside, a directory that
// belongs to the OS: agents' homes there would be hidden or read-only.
func underSystemDir(p string) bool {
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib64", "/home", "/root"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// agents reads the list form or the {count: N} form.
func (w *walker) agents(n *yaml.Node, defaults Agent) []Agent {
	if n.Kind == yaml.MappingNode {
		fs, ok := w.fields(n, "agents", countKeys...)
		if !ok {
			return nil
		}
		cn, ok := fs["count"]
		if !ok {
			w.fail("agents.count", "missing; write agents: {count: 3} for agents 1..3, or list them")
			return nil
		}
		count, ok := w.integer(cn, "agents.count", "a number of agents", 1, MaxID)
		tmpl := w.agentFields(fs, "agents", defaults)
		w.agentRules(tmpl, "agents")
		if !ok {
			return nil
		}
		out := make([]Agent, count)
		for i := range out {
			out[i] = tmpl
			out[i].ID = i + 1
		}
		return out
	}
	if n.Kind != yaml.SequenceNode {
		w.fail("agents", "is %s; list the agents (- id: 1) or give a count (agents: {count: 3})", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		w.fail("agents", "is empty; list at least one agent (- id: 1)")
		return nil
	}
	var out []Agent
	seen := map[int]int{} // id -> index
	for i, item := range n.Content {
		path := index("agents", i)
		fs, ok := w.fields(item, path, agentKeys...)
		if !ok {
			continue
		}
		a := w.agentFields(fs, path, defaults)
		w.agentRules(a, path)
		idNode := fs["id"]
		if idNode == nil {
			w.fail(path+".id", "missing; every agent needs an id, e.g. - id: %d", i+1)
			continue
		}
		id, ok := w.id(idNode, path+".id")
		if !ok {
			continue
		}
		if j, dup := seen[id]; dup {
			w.fail(path+".id", "%d is already the id of agents[%d]; give every agent its own id", id, j)
			continue
		}
		seen[id] = i
		a.ID = id
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (w *walker) id(n *yaml.Node, path string) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, err := parseInt(n.Value); err == nil && v < 1 {
			w.fail(path, "%s is not a positive id; agent ids start at 1", n.Value)
			return 0, false
		}
	}
	v, ok := w.integer(n, path, "an agent id", 1, MaxID)
	return int(v), ok
}
