package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/wire"
)

// agentFields applies the fields an agent (or defaults, or the count form)
// sets over base. An agent's own field replaces the default one; limits
// replace field by field.
func (w *walker) agentFields(fs map[string]*yaml.Node, path string, base Agent) Agent {
	a := base
	a.Egress = append([]Egress(nil), base.Egress...)
	a.Command = append([]string(nil), base.Command...)
	a.Exec = append([]string(nil), base.Exec...)
	a.Subjects.Publish = append([]string(nil), base.Subjects.Publish...)
	a.Subjects.Subscribe = append([]string(nil), base.Subjects.Subscribe...)
	a.Env = maps.Clone(base.Env)
	a.Models = append([]Grant(nil), base.Models...)
	a.Secrets = append([]string(nil), base.Secrets...)
	if n, ok := fs["host"]; ok {
		a.Host = w.hostRef(n, join(path, "host"))
	}
	if n, ok := fs["role"]; ok {
		a.Role = w.role(n, join(path, "role"))
	}
	if n, ok := fs["level"]; ok {
		a.Level = w.level(n, join(path, "level"))
	}
	if n, ok := fs["command"]; ok {
		a.Command = w.command(n, join(path, "command"), "run per task")
	}
	if n, ok := fs["exec"]; ok {
		a.Exec = w.command(n, join(path, "exec"), "the agent's own program")
	}
	if n, ok := fs["rootfs"]; ok {
		a.Rootfs = w.rootfs(n, join(path, "rootfs"))
	}
	if n, ok := fs["image"]; ok {
		a.Image = w.image(n, join(path, "image"))
	}
	if n, ok := fs["task_timeout"]; ok {
		a.TaskTimeout = w.duration(n, join(path, "task_timeout"), time.Second, 24*time.Hour, "5m")
	}
	if n, ok := fs["max_output"]; ok {
		a.MaxOutput = w.maxOutput(n, join(path, "max_output"))
	}
	if n, ok := fs["heartbeat"]; ok {
		a.Heartbeat = w.duration(n, join(path, "heartbeat"), time.Second, time.Hour, "30s")
	}
	if n, ok := fs["subjects"]; ok {
		a.Subjects = w.subjects(n, join(path, "subjects"))
	}
	if n, ok := fs["limits"]; ok {
		a.Limits = w.limits(n, join(path, "limits"), a.Limits)
	}
	if n, ok := fs["common"]; ok {
		a.Common = w.access(n, join(path, "common"))
	}
	if n, ok := fs["jit"]; ok {
		a.JIT = w.boolean(n, join(path, "jit"), "the agent runs a JIT: Node, a JVM, .NET, PyPy")
	}
	if n, ok := fs["egress"]; ok {
		a.Egress = w.egress(n, join(path, "egress"))
	}
	if n, ok := fs["models"]; ok {
		a.Models = w.models(n, join(path, "models"))
	}
	if n, ok := fs["secrets"]; ok {
		a.Secrets = w.secretGrants(n, join(path, "secrets"))
	}
	if n, ok := fs["shares"]; ok {
		a.Shares = w.shares(n, join(path, "shares"), a.Shares)
	}
	if n, ok := fs["task_budget"]; ok {
		a.TaskBudget = w.taskBudget(n, join(path, "task_budget"))
	} else if a.Role != RoleWorker || !a.HasModels() {
		// The defaults' budget is for the workers that call models.
		a.TaskBudget = wire.TaskBudget{}
	}
	if n, ok := fs["env"]; ok {
		for k, v := range w.env(n, join(path, "env")) {
			if a.Env == nil {
				a.Env = map[string]string{}
			}
			a.Env[k] = v
		}
	}
	return a
}

func (w *walker) role(n *yaml.Node, path string) Role {
	r, _ := oneOf(w, n, path, "a role", "orchestrator, worker or monitor", RoleWorker, RoleOrchestrator, RoleWorker, RoleMonitor)
	return r
}

func (w *walker) level(n *yaml.Node, path string) Level {
	l, _ := oneOf(w, n, path, "a level", sandbox.Or(sandbox.Levels()), LevelProcess, sandbox.Levels()...)
	return l
}

func (w *walker) access(n *yaml.Node, path string) Access {
	a, _ := oneOf(w, n, path, "an access", "ro (read-only, the default) or rw", AccessRO, AccessRO, AccessRW)
	return a
}

// oneOf reads a scalar that must be one of choices; what names its kind
// ("a role"), fix lists the choices for the operator. A wrong value is
// reported once and def returned in its place.
func oneOf[T ~string](w *walker, n *yaml.Node, path, what, fix string, def T, choices ...T) (T, bool) {
	s, ok := w.str(n, path, string(def))
	if !ok {
		return def, false
	}
	for _, c := range choices {
		if T(s) == c {
			return c, true
		}
	}
	w.fail(path, "%q is not %s; choose %s", s, what, fix)
	return def, false
}

const commandExample = `["/usr/bin/python3", "agent.py"]`

// agentRules checks what depends on more than one field of an agent.
func (w *walker) agentRules(a Agent, path string) {
	w.hostRule(a, path)
	switch {
	case len(a.Command) > 0 && len(a.Exec) > 0:
		w.fail(join(path, "command"), "is given with exec; give command (run once per task) or exec (the agent's own long-running program), not both")
	case len(a.Command) > 0 && a.Role != RoleWorker:
		w.fail(join(path, "command"), "is for workers, which take tasks; %s runs its own program: write exec: %s", map[Role]string{RoleOrchestrator: "an orchestrator", RoleMonitor: "a monitor"}[a.Role], commandExample)
	}
	w.rootRules(a, path)
	w.grantEnvRules(a, path)
	w.secretGrantRules(a, path, w.secretList)
	switch {
	case !a.TaskBudget.Any():
	case a.Role != RoleWorker:
		w.fail(join(path, "task_budget"), "is for workers, which take tasks; this agent's role is %s: remove task_budget, or give budgets: a limit for it", a.Role)
	case !a.HasModels():
		w.fail(join(path, "task_budget"), "limits what each task spends on models, and the agent is granted none: give it models:, or remove task_budget")
	}
}

const taskBudgetExample = `task_budget: {usd: 0.50, tokens: 200000}`

// taskBudget reads a worker's task_budget: tokens, usd or both.
func (w *walker) taskBudget(n *yaml.Node, path string) wire.TaskBudget {
	var b wire.TaskBudget
	fs, ok := w.fields(n, path, "tokens", "usd")
	if !ok {
		return b
	}
	if x, ok := fs["tokens"]; ok {
		b.Tokens = w.tokens(x, join(path, "tokens"))
	}
	if x, ok := fs["usd"]; ok {
		b.USD = w.usd(x, join(path, "usd"))
	}
	if len(fs) == 0 {
		w.fail(path, "limits nothing; write e.g. %s", taskBudgetExample)
	}
	return b
}

const rootfsExample = sandbox.RootfsExample

// rootRules: a container level needs a root file system, and only one;
// what each level takes is its driver's rule.
func (w *walker) rootRules(a Agent, path string) {
	if a.Level.Contained() && a.Rootfs != "" && a.Image != "" {
		w.fail(join(path, "image"), "is given with rootfs; give one root file system: rootfs (a directory) or image (podman's local store)")
		return
	}
	if d, ok := sandbox.Lookup(a.Level); ok {
		if field, problem := d.CheckRoot(a.Rootfs, a.Image); problem != "" {
			w.fail(join(path, field), "%s", problem)
		}
	}
}

// absPath reads an absolute, clean path; ok is false once it failed.
func (w *walker) absPath(n *yaml.Node, path, example string) (string, bool) {
	s, ok := w.str(n, path, example)
	switch {
	case !ok:
		return "", false
	case !filepath.IsAbs(s):
		w.fail(path, "%q is not an absolute path; write e.g. %s", s, example)
	case filepath.Clean(s) != s:
		w.fail(path, "%q is not a clean path; write %s", s, filepath.Clean(s))
	default:
		return s, true
	}
	return s, false
}

func (w *walker) rootfs(n *yaml.Node, path string) string {
	s, ok := w.absPath(n, path, rootfsExample)
	if !ok {
		return s
	}
	switch {
	case s == "/":
		w.fail(path, "is the host's own root; give a directory holding the agent's root file system, e.g. %s", rootfsExample)
	case s == StateDir || strings.HasPrefix(s, StateDir+"/"):
		w.fail(path, "%q is inside %s, flock's own state; choose e.g. %s", s, StateDir, rootfsExample)
	case underSystemDir(s):
		w.fail(path, "%q is a system directory; give a directory of its own, e.g. %s", s, rootfsExample)
	case strings.ContainsAny(s, " \t\n\\%$\"',:"):
		w.fail(path, "%q has a space, quote, comma, colon, backslash, %% or $ that podman or unit files would misread; choose a plain path, e.g. %s", s, rootfsExample)
	}
	return s
}

// imageRe is a podman image reference: [host[:port]/]name[:tag][@digest].
var imageRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*(@sha256:[a-f0-9]{64})?$`)

func (w *walker) image(n *yaml.Node, path string) string {
	s, ok := w.str(n, path, "localhost/agent:latest")
	if ok && !imageRe.MatchString(s) {
		w.fail(path, "%q is not an image reference; write e.g. localhost/agent:latest (podman images lists the local store)", s)
	}
	return s
}

func (w *walker) command(n *yaml.Node, path, what string) []string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		w.fail(path, "%s is a string; write the command as an argv list, e.g. %s", kindName(n), commandExample)
		return nil
	}
	argv, ok := w.strList(n, path, commandExample)
	if !ok {
		return nil
	}
	if len(argv) == 0 {
		w.fail(path, "is empty; give %s as an argv list such as %s, or leave it out to run flock-agent's own program", what, commandExample)
		return nil
	}
	if argv[0] == "" {
		w.fail(index(path, 0), "is empty; name the program to run, e.g. /usr/bin/python3")
	}
	for i, arg := range argv {
		if strings.ContainsRune(arg, 0) {
			w.fail(index(path, i), "holds a NUL byte, which no program can receive; remove it")
		}
	}
	return argv
}

func (w *walker) limits(n *yaml.Node, path string, base Limits) Limits {
	fs, ok := w.fields(n, path, limitKeys...)
	if !ok {
		return base
	}
	l := base
	if m, ok := fs["memory"]; ok {
		l.MemoryBytes = w.memory(m, join(path, "memory"))
	}
	if c, ok := fs["cpu"]; ok {
		l.CPUPercent = w.cpu(c, join(path, "cpu"))
	}
	if t, ok := fs["tasks"]; ok {
		v, _ := w.integer(t, join(path, "tasks"), "a number of processes and threads", 1, 1<<22)
		l.Tasks = int(v)
	}
	return l
}

var sizeRe = regexp.MustCompile(`^([0-9]+)([KMGT]?)$`)

// memory reads a size the way systemd writes one: bytes, or K/M/G/T,
// 1024-based.
func (w *walker) memory(n *yaml.Node, path string) uint64 {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.fail(path, "is %s; write a size such as 256M", kindName(n))
		return 0
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		w.fail(path, "%s", err)
		return 0
	}
	if v < MinMemory {
		w.fail(path, "%s is too little for an agent; give at least 16M", n.Value)
	}
	return v
}

// ParseSize reads "256M"-style sizes; its error says how to write one.
func ParseSize(s string) (uint64, error) {
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size; write %s", s, sizeFix(s))
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m[2]]
	if err != nil || v > (1<<63)>>shift {
		return 0, fmt.Errorf("%q is too large; write at most 8192T", s)
	}
	return v << shift, nil
}

var looseSizeRe = regexp.MustCompile(`^\s*([0-9]+)\s*([kKmMgGtT])(?:i?[bB])?\s*$`)

// sizeFix guesses what a wrong size meant ("256 MB" -> 256M).
func sizeFix(s string) string {
	if m := looseSizeRe.FindStringSubmatch(s); m != nil {
		return m[1] + strings.ToUpper(m[2])
	}
	return "a whole number of bytes, or of K, M, G or T (1024-based), e.g. 256M"
}

var cpuRe = regexp.MustCompile(`^([0-9]+)%$`)

// cpu reads a percentage of one CPU; 200% is two.
func (w *walker) cpu(n *yaml.Node, path string) int {
	m := cpuRe.FindStringSubmatch(n.Value)
	if n.Kind != yaml.ScalarNode || m == nil {
		fix := "a percentage of one CPU, e.g. 50% (200% is two CPUs)"
		if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
			fix = n.Value + "%"
		}
		w.fail(path, "%s is not a CPU share; write %s", kindName(n), fix)
		return 0
	}
	v, err := strconv.Atoi(m[1])
	if err != nil || v < 1 || v > 100000 {
		w.fail(path, "%s is out of range; write from 1%% to 100000%%", n.Value)
		return 0
	}
	return v
}

const egressExample = `["10.1.2.3:443", "192.0.2.0/24:53/udp"]`

func (w *walker) egress(n *yaml.Node, path string) []Egress {
	items, ok := w.strList(n, path, egressExample)
	if !ok {
		return nil
	}
	out := make([]Egress, 0, len(items))
	for i, s := range items {
		e, err := ParseEgress(s)
		if err != nil {
			w.fail(index(path, i), "%s", err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// bus reads the bus's listeners (loopback only, so the bus is never
// reachable from outside the host) and how it keeps tasks.
func (w *walker) bus(n *yaml.Node, path string) Bus {
	b := defaultBus()
	fs, ok := w.fields(n, path, busKeys...)
	if !ok {
		return b
	}
	if l, ok := fs["listen"]; ok {
		b.Host, b.Port = w.loopback(l, join(path, "listen"), "127.0.0.1:4222", busLoopback, b.Host, b.Port)
	}
	if m, ok := fs["monitor"]; ok {
		if m.Kind == yaml.ScalarNode && m.Value == "off" {
			b.MonitorHost, b.MonitorPort = "", 0
		} else {
			b.MonitorHost, b.MonitorPort = w.loopback(m, join(path, "monitor"), "127.0.0.1:8222 (or off)", busLoopback, b.MonitorHost, b.MonitorPort)
		}
	}
	if m, ok := fs["metrics"]; ok {
		if m.Kind == yaml.ScalarNode && m.Value == "off" {
			b.MetricsHost, b.MetricsPort = "", 0
		} else {
			b.MetricsHost, b.MetricsPort = w.loopback(m, join(path, "metrics"), "127.0.0.1:8223 (or off)", metricsLoopback, b.MetricsHost, b.MetricsPort)
		}
	}
	if s, ok := fs["store_max"]; ok {
		b.StoreMax = w.storeMax(s, join(path, "store_max"))
	}
	if d, ok := fs["max_deliveries"]; ok {
		v, _ := w.integer(d, join(path, "max_deliveries"), "a number of deliveries", 1, MaxDeliveriesLimit)
		b.MaxDeliveries = int(v)
	}
	if n, ok := fs["max_subscriptions"]; ok {
		v, _ := w.integer(n, join(path, "max_subscriptions"), "a number of subscriptions per connection", MinMaxSubscriptions, 1<<20)
		b.MaxSubscriptions = int(v)
	}
	if n, ok := fs["max_pending"]; ok {
		if v := w.size(n, join(path, "max_pending"), "16M", MinMaxPending); v >= MinMaxPending {
			b.MaxPending = v
		}
	}
	if n, ok := fs["send_rate"]; ok {
		if v := w.size(n, join(path, "send_rate"), "16M (bytes a second)", MinSendRate); v >= MinSendRate {
			b.SendRate = v
		}
	}
	if n, ok := fs["connect_rate"]; ok {
		v, _ := w.integer(n, join(path, "connect_rate"), "a number of new connections a second", MinConnectRate, MaxConnectRate)
		b.ConnectRate = int(v)
	}
	if c, ok := fs["cluster_port"]; ok {
		// Checked against the other ports once the hosts are known (settle).
		v, _ := w.integer(c, join(path, "cluster_port"), "a port", 1, 65535)
		b.ClusterPort = int(v)
	}
	if s, ok := fs["sync"]; ok {
		b.Sync = w.sync(s, join(path, "sync"))
	}
	if b.Monitor() == b.Listen() {
		w.fail(join(path, "monitor"), "%s is also bus.listen; give the monitoring endpoint its own port, e.g. %s:%d", b.Monitor(), b.Host, DefaultMonitor)
	}
	for _, other := range []struct{ name, addr string }{{"bus.listen", b.Listen()}, {"bus.monitor", b.Monitor()}} {
		if b.Metrics() != "" && b.Metrics() == other.addr {
			w.fail(join(path, "metrics"), "%s is also %s; give /metrics its own port, e.g. %s:%d", b.Metrics(), other.name, DefaultBusHost, DefaultMetrics)
		}
	}
	return b
}

// sync reads the bus's sync policy: always, or how long the kernel may
// hold what was acknowledged before it reaches the disk.
func (w *walker) sync(n *yaml.Node, path string) time.Duration {
	s, ok := w.str(n, path, "always")
	if !ok || s == "always" {
		return SyncAlways
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		w.fail(path, "%q is neither always nor a duration; write always (the default: every task and result on disk before it is acknowledged) or an interval such as 1s (faster, loses up to that much when the power goes)", s)
	case d < MinSync || d > MaxSync:
		w.fail(path, "%s is out of range; write always, or an interval from %s to %s", s, MinSync, MaxSync)
	default:
		return d
	}
	return SyncAlways
}

// Why each listener must be on loopback, for the error naming it.
const (
	busLoopback = "the bus listens on loopback only"
	// Agents reach nothing on this host's loopback but the bus (netpolicy),
	// and may be allowed a LAN: there, /metrics would be theirs to read.
	metricsLoopback = "/metrics listens on loopback only, out of the agents' reach (an agent allowed egress to this host's network could read it on a LAN address; scrape from elsewhere through ssh -L)"
)

// storeMax reads the bound of the bus's store, a size.
func (w *walker) storeMax(n *yaml.Node, path string) uint64 {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.fail(path, "is %s; write a size such as 1G", kindName(n))
		return DefaultStoreMax
	}
	v, err := ParseSize(n.Value)
	switch {
	case err != nil:
		w.fail(path, "%s", err)
	case v < MinStoreMax:
		w.fail(path, "%s is too little for the bus's tasks and results; give at least 64M", n.Value)
	default:
		return v
	}
	return DefaultStoreMax
}

// loopback reads a loopback address and port; why says why it must be one.
func (w *walker) loopback(n *yaml.Node, path, example, why, host string, port int) (string, int) {
	s, ok := w.str(n, path, example)
	if !ok {
		return host, port
	}
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		w.fail(path, "%q is not an address and port; write e.g. %s", s, example)
	case !ap.Addr().IsLoopback():
		w.fail(path, "%q is not a loopback address; %s, e.g. %s", s, why, example)
	case ap.Port() == 0:
		w.fail(path, "%q has no port; write e.g. %s", s, example)
	default:
		return ap.Addr().String(), int(ap.Port())
	}
	return host, port
}

// duration reads a Go duration ("30s", "5m") in [lo, hi].
func (w *walker) duration(n *yaml.Node, path string, lo, hi time.Duration, example string) time.Duration {
	s, ok := w.str(n, path, example)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		w.fail(path, "%q is not a duration; write e.g. %s (units: s, m, h)", s, example)
	case d < lo || d > hi:
		w.fail(path, "%s is out of range; write from %s to %s", s, lo, hi)
	}
	return d
}

func (w *walker) maxOutput(n *yaml.Node, path string) uint64 {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.fail(path, "is %s; write a size such as 256K", kindName(n))
		return 0
	}
	v, err := ParseSize(n.Value)
	switch {
	case err != nil:
		w.fail(path, "%s", err)
	case v < 1<<10 || v > MaxOutputLimit:
		w.fail(path, "%s is out of range; write from 1K to 1M (larger results belong in the shared directory)", n.Value)
	}
	return v
}

func (w *walker) subjects(n *yaml.Node, path string) Subjects {
	var s Subjects
	fs, ok := w.fields(n, path, subjectsKeys...)
	if !ok {
		return s
	}
	read := func(key string) []string {
		l, ok := fs[key]
		if !ok {
			return nil
		}
		p := join(path, key)
		items, ok := w.strList(l, p, `["reports.>"]`)
		if !ok {
			return nil
		}
		for i, subj := range items {
			if why := badSubject(subj); why != "" {
				w.fail(index(p, i), "%q %s", subj, why)
			}
		}
		return items
	}
	s.Publish, s.Subscribe = read("publish"), read("subscribe")
	return s
}

// badSubject says what is wrong with a NATS subject pattern a spec grants,
// or "". Subjects of the bus itself and other agents' names are refused:
// a grant may widen what an agent says, never let it speak as another.
func badSubject(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return "is not a subject; write dot-separated tokens without spaces, e.g. reports.>"
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return "has an empty token; write e.g. reports.daily"
		case t == ">" && i != len(toks)-1:
			return "has > before the end; > matches the rest, so it goes last"
		case strings.ContainsAny(t, "*>") && len(t) > 1:
			return "mixes * or > into a token; use them as whole tokens, e.g. reports.*"
		}
	}
	switch toks[0] {
	case ">", "*":
		return "would grant every subject, including other agents' names and inboxes; name a subject space, e.g. reports.>"
	case "agent", "_INBOX", "flock", "tasks", "task", "broadcast":
		return "is in a space the roles govern (agent.*, _INBOX.*, flock.*, tasks.*, task.*, broadcast); choose another, e.g. reports.>"
	}
	if strings.HasPrefix(toks[0], "$") {
		return "is a system subject ($...); choose another, e.g. reports.>"
	}
	return ""
}

func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReservedEnv says whether flock sets the variable name itself, for every
// agent (agent.Env, and PATH: systemd's, or the container's) or for those
// with names in their egress (the proxy's): a spec's env may not change
// what flock hands the agent.
func ReservedEnv(name string) bool {
	up := strings.ToUpper(name)
	for _, prefix := range []string{"AGENT_", "NATS_", "FLOCK_"} {
		if strings.HasPrefix(up, prefix) {
			return true
		}
	}
	switch up {
	case "HOME", "PATH", "SHARED_DIR", "CREDENTIALS_DIRECTORY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY":
		return true
	}
	return false
}

// env reads a mapping of variable names to values for the agent's program.
func (w *walker) env(n *yaml.Node, path string) map[string]string {
	const example = "{LOG_LEVEL: debug, NODE_EXTRA_CA_CERTS: /etc/ssl/certs/internal-ca.pem}"
	if n.Kind != yaml.MappingNode {
		w.fail(path, "is %s; write a mapping of variable names to values, e.g. %s", kindName(n), example)
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		p := join(path, k)
		switch {
		case !envName.MatchString(k):
			w.fail(path, "%q is not a variable name; use letters, digits and _, not starting with a digit", k)
			continue
		case ReservedEnv(k):
			w.fail(p, "flock sets %s itself (AGENT_*, NATS_*, FLOCK_*, HOME, PATH, SHARED_DIR, CREDENTIALS_DIRECTORY and the proxy's variables); choose another name, or give exec a full path", k)
			continue
		}
		if _, dup := out[k]; dup {
			w.fail(p, "given twice; keep one")
			continue
		}
		val, ok := w.str(v, p, `"debug"`)
		if !ok {
			continue
		}
		if strings.ContainsAny(val, "\x00\n\r") || len(val) > 4096 {
			w.fail(p, "has a line break, a NUL or more than 4096 bytes; write one line (put more in a file under the agent's directory)")
			continue
		}
		out[k] = val
	}
	return out
}
