package bus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/spec"
)

// ConfigPath is where provision writes the bus configuration.
const ConfigPath = "/etc/flock/bus.json"

// Config is the bus as provision wants it: written as JSON to ConfigPath, read by `flockctl serve`.
type Config struct {
	Listen  string `json:"listen"`            // "127.0.0.1:4222"
	Monitor string `json:"monitor,omitempty"` // "127.0.0.1:8222"; "" = no monitoring endpoint
	Metrics string `json:"metrics,omitempty"` // "127.0.0.1:8223", where /metrics is served; "" = off
	Users   []User `json:"users"`             // agents by id, then the operator
	// UIDBase is the spec's uid_base: agent N is uid UIDBase+N, which is
	// how /metrics names the agent of a firewall counter (kept per uid).
	// 0 in a config an older flockctl wrote.
	UIDBase uint32 `json:"uid_base,omitempty"`
	Tasks   Tasks  `json:"tasks"` // how tasks and results are kept
	// Cluster joins this host's bus to the other hosts' (a multi-host
	// flock); nil on one host.
	Cluster *Cluster `json:"cluster,omitempty"`
	// MaxSubscriptions and MaxPending bound every connection (nats-server
	// applies them per connection, to any user); 0: the default.
	MaxSubscriptions int   `json:"max_subscriptions,omitempty"`
	MaxPending       int64 `json:"max_pending,omitempty"`
}

// Cluster is how this host's bus meets the others': NATS routes with
// mutual TLS (every host's certificate is signed by the flock's own CA)
// and a route password, JetStream replicated across them.
type Cluster struct {
	Name   string   `json:"name"`   // spec.ClusterName
	Server string   `json:"server"` // this host's name: the NATS server_name, unique in the cluster
	Listen string   `json:"listen"` // this host's address:cluster port
	Routes []string `json:"routes"` // the other hosts' address:cluster port, sorted
	// Peers are the other hosts' names (their buses' server names),
	// sorted: /metrics says of each whether this bus has a route to it.
	// Empty in a config an older flockctl wrote.
	Peers    []string `json:"peers,omitempty"`
	Replicas int      `json:"replicas"` // copies of each stream (spec.Flock.Replicas)
	// Hosts names the host of every agent id, for status across hosts.
	Hosts map[int]string `json:"hosts"`
	// Files are the cluster's secrets, read at start (serve runs with
	// them as systemd credentials): PEM CA, this host's certificate and
	// key, and the route password.
	CAFile       string `json:"ca_file"`
	CertFile     string `json:"cert_file"`
	KeyFile      string `json:"key_file"`
	PasswordFile string `json:"password_file"`
}

// User is one identity on the bus and what it may do there.
type User struct {
	Name        string        `json:"name"`            // "flock-3", or creds.OperatorName, ProxyName, ReaderName
	Agent       int           `json:"agent,omitempty"` // 0 for the operator
	Nkey        string        `json:"nkey"`            // public user nkey (U...)
	Publish     []string      `json:"publish"`
	Subscribe   []string      `json:"subscribe"`
	ResponseTTL time.Duration `json:"response_ttl,omitempty"` // may answer requests it received for this long (allow_responses, max 1 msg); 0 = not at all
	// Its shares (spec.Shares): connections open at once, and what it
	// sent into TASKS waiting or running; 0: no share (the operator).
	Connections int   `json:"connections,omitempty"`
	Tasks       int   `json:"tasks,omitempty"`
	TaskBytes   int64 `json:"task_bytes,omitempty"`
}

// Equal reports whether c and o configure the same bus. A nil and an empty
// list are the same (JSON turns one into the other).
func (c Config) Equal(o Config) bool { return c.Digest() == o.Digest() }

// Digest names what c configures: two configs have the same digest exactly
// when they configure the same bus. The running bus reports the digest of
// the config in force (wire.BusStatus.Config), so a provision sees a
// config written but never loaded (a reload refused, or killed before it).
func (c Config) Digest() string {
	h := sha256.New()
	field := func(s ...string) {
		for _, x := range s {
			h.Write([]byte(x))
			h.Write([]byte{0})
		}
		h.Write([]byte{1}) // ends a list: ["a", "b"] is not ["a"], ["b"]
	}
	field(c.Listen, c.Monitor, c.Metrics, strconv.Itoa(len(c.Users)), fmt.Sprint(c.maxSubscriptions(), c.maxPending()))
	for _, u := range c.Users {
		field(u.Name, strconv.Itoa(u.Agent), u.Nkey, u.ResponseTTL.String(), fmt.Sprint(u.Connections, u.Tasks, u.TaskBytes))
		field(u.Publish...)
		field(u.Subscribe...)
	}
	if c.UIDBase != 0 { // a config without it keeps its digest
		field("uid_base", strconv.FormatUint(uint64(c.UIDBase), 10))
	}
	t := c.Tasks.withDefaults()
	field(fmt.Sprint(t.StoreMax, t.MemoryMax, t.MaxDeliveries, t.AckWait, t.ResultWindow, t.Workers, t.Metered, t.Sync))
	if cl := c.Cluster; cl != nil {
		field(cl.Name, cl.Server, cl.Listen, strconv.Itoa(cl.Replicas), cl.CAFile, cl.CertFile, cl.KeyFile, cl.PasswordFile)
		field(cl.Routes...)
		if len(cl.Peers) > 0 { // a config without them keeps its digest
			field(cl.Peers...)
		}
		for _, id := range slices.Sorted(maps.Keys(cl.Hosts)) {
			field(strconv.Itoa(id), cl.Hosts[id])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// NeedsRestart reports whether going from old to c needs a new server
// rather than a reload: a running server cannot rebind its listeners
// (serve binds /metrics once, at start), nor shrink its store, nor change
// how it syncs (nats-server reloads no sync setting). Any change
// of the cluster but its agents' hosts needs a restart too: nats-server
// cannot move its cluster listener, JetStream cannot turn clustered (or
// back) in a running server, and the TLS material and route password are
// read once, at start (a reload builds nats-server's options afresh and
// must hand it the same cluster it runs). Hosts only says where each
// agent runs (which desk serves it): a reload takes it.
func (c Config) NeedsRestart(old Config) bool {
	n, o := c.Tasks.withDefaults(), old.Tasks.withDefaults()
	return c.Listen != old.Listen || c.Monitor != old.Monitor || c.Metrics != old.Metrics ||
		n.StoreMax != o.StoreMax || n.MemoryMax != o.MemoryMax || n.Sync != o.Sync || !sameCluster(c.Cluster, old.Cluster) ||
		c.maxSubscriptions() != old.maxSubscriptions() || c.maxPending() != old.maxPending()
}

// maxSubscriptions and maxPending are the bounds of every connection,
// defaults applied. nats-server takes neither at a reload.
func (c Config) maxSubscriptions() int {
	if c.MaxSubscriptions == 0 {
		return spec.DefaultMaxSubscriptions
	}
	return c.MaxSubscriptions
}

func (c Config) maxPending() int64 {
	if c.MaxPending == 0 {
		return spec.DefaultMaxPending
	}
	return c.MaxPending
}

// sameCluster compares a and b but for Hosts.
func sameCluster(a, b *Cluster) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Hosts, y.Hosts = nil, nil
	return reflect.DeepEqual(x, y)
}

// validate catches what would make the server refuse or misattribute a
// user: a bad address, a key that is not a user's, a name or key twice.
func (c Config) validate() error {
	if _, _, err := splitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if c.Monitor != "" {
		if _, _, err := splitHostPort(c.Monitor); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	if c.Metrics != "" {
		if _, _, err := splitHostPort(c.Metrics); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	names, keys := map[string]bool{}, map[string]bool{}
	for i, u := range c.Users {
		switch {
		case u.Name == "":
			return fmt.Errorf("users[%d]: no name", i)
		case names[u.Name]:
			return fmt.Errorf("users[%d]: %s appears twice", i, u.Name)
		case !nkeys.IsValidPublicUserKey(u.Nkey):
			return fmt.Errorf("users[%d] (%s): %q is not a public user nkey (U...)", i, u.Name, u.Nkey)
		case keys[u.Nkey]:
			return fmt.Errorf("users[%d] (%s): nkey %s is already another user's", i, u.Name, u.Nkey)
		case u.Agent == 0 && u.Name != creds.OperatorName && u.Name != creds.ProxyName && u.Name != creds.ReaderName, u.Agent != 0 && u.Name != spec.UserName(u.Agent):
			return fmt.Errorf("users[%d]: name %s does not go with agent %d", i, u.Name, u.Agent)
		case u.ResponseTTL < 0:
			return fmt.Errorf("users[%d] (%s): negative response_ttl", i, u.Name)
		case u.Connections < 0 || u.Tasks < 0 || u.TaskBytes < 0:
			return fmt.Errorf("users[%d] (%s): a negative share (connections %d, tasks %d, task_bytes %d)", i, u.Name, u.Connections, u.Tasks, u.TaskBytes)
		}
		names[u.Name], keys[u.Nkey] = true, true
	}
	if err := c.Tasks.validate(); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if (c.MaxSubscriptions != 0 && c.MaxSubscriptions < spec.MinMaxSubscriptions) || (c.MaxPending != 0 && c.MaxPending < spec.MinMaxPending) {
		return fmt.Errorf("max_subscriptions %d, max_pending %d: give at least %d subscriptions and %d bytes (0: the defaults)", c.MaxSubscriptions, c.MaxPending, spec.MinMaxSubscriptions, int64(spec.MinMaxPending))
	}
	if c.Cluster != nil {
		if err := c.Cluster.validate(); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		// Only an agent's own host's bus serves it: one without a host
		// would never be served.
		for _, u := range c.Users {
			if _, ok := c.Cluster.Hosts[u.Agent]; u.Agent > 0 && !ok {
				return fmt.Errorf("cluster: hosts: agent %d (a user) has no host", u.Agent)
			}
		}
	}
	return nil
}

// MaxReplicas is JetStream's bound on a stream's copies.
const MaxReplicas = 5

// serverName is a host's name as spec allows it: it goes into subjects
// (the bus's own inbox, its requests), so no dots or wildcards.
var serverName = regexp.MustCompile(`^[a-z0-9-]{1,63}$`)

func (cl Cluster) validate() error {
	switch {
	case cl.Name == "":
		return errors.New("no name (spec.ClusterName)")
	case !serverName.MatchString(cl.Server):
		return fmt.Errorf("server %q is not a host name ([a-z0-9-]{1,63})", cl.Server)
	case cl.Replicas < 1 || cl.Replicas > MaxReplicas || cl.Replicas > len(cl.Routes)+1:
		return fmt.Errorf("replicas %d is not 1-%d, nor more than the %d hosts", cl.Replicas, MaxReplicas, len(cl.Routes)+1)
	case cl.CAFile == "" || cl.CertFile == "" || cl.KeyFile == "" || cl.PasswordFile == "":
		return errors.New("ca_file, cert_file, key_file and password_file must all be set (provision writes them; see flockctl cluster certs)")
	}
	if _, _, err := splitHostPort(cl.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	seen := map[string]bool{cl.Listen: true}
	for i, r := range cl.Routes {
		if _, _, err := splitHostPort(r); err != nil {
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
		if seen[r] {
			return fmt.Errorf("routes[%d]: %s appears twice, or is this host's listen address", i, r)
		}
		seen[r] = true
	}
	if len(cl.Peers) > 0 && len(cl.Peers) != len(cl.Routes) {
		return fmt.Errorf("peers: %d names for %d routes", len(cl.Peers), len(cl.Routes))
	}
	names := map[string]bool{cl.Server: true}
	for i, p := range cl.Peers {
		if !serverName.MatchString(p) || names[p] {
			return fmt.Errorf("peers[%d]: %q is not another host's name, or appears twice", i, p)
		}
		names[p] = true
	}
	for id, h := range cl.Hosts {
		if id < 1 || id > spec.MaxID || !serverName.MatchString(h) {
			return fmt.Errorf("hosts: agent %d on %q is not an agent id on a host name", id, h)
		}
	}
	return nil
}

// splitHostPort parses host:port; port -1 (any free port) is allowed for tests.
func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", hp, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 || port == 0 {
		return "", 0, fmt.Errorf("%q: port %q is not 1-65535", hp, p)
	}
	return host, port, nil
}

// ReadConfig reads and checks the configuration provision wrote at path.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading bus configuration: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("decoding bus configuration %s: %w (provision again to rewrite it)", path, err)
	}
	if err := c.validate(); err != nil {
		return Config{}, fmt.Errorf("bus configuration %s: %w (provision again to rewrite it)", path, err)
	}
	return c, nil
}

// WriteConfig replaces the file at path atomically, so serve never reads a
// half-written one. It is world-readable: it holds only public keys.
func WriteConfig(path string, c Config) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("writing bus configuration %s: %w", path, err)
	}
	data, err := c.marshal()
	if err != nil {
		return fmt.Errorf("encoding bus configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing bus configuration: %w", err)
	}
	if err := fsutil.WriteAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("writing bus configuration: %w", err)
	}
	return nil
}

// marshal is c as an operator reads it: indented, subjects unescaped
// (encoding/json would write > as \u003e).
func (c Config) marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
