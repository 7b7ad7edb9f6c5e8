package bus

// Tier: unit (no root).

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
)

// fixedKeys are stable public keys (from constant seeds) for golden files.
func fixedKeys(t testing.TB, names ...string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for i, n := range names {
		kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(i + 1)}, 32))
		if err != nil {
			t.Fatal(err)
		}
		keys[n], _ = kp.PublicKey()
	}
	return keys
}

// goldenFlock is testFlock on the default ports, monitoring and metrics
// on, every agent with the default shares.
func goldenFlock() *spec.Flock {
	f := testFlock()
	f.Bus = spec.Bus{Host: spec.DefaultBusHost, Port: spec.DefaultBusPort, MonitorHost: spec.DefaultBusHost, MonitorPort: spec.DefaultMonitor,
		MetricsHost: spec.DefaultBusHost, MetricsPort: spec.DefaultMetrics,
		MaxSubscriptions: spec.DefaultMaxSubscriptions, MaxPending: spec.DefaultMaxPending}
	f.UIDBase = spec.DefaultUIDBase
	for i := range f.Agents {
		f.Agents[i].Shares = spec.Shares{Connections: spec.DefaultConnections, Tasks: spec.DefaultTaskShare, TaskBytes: spec.DefaultTaskBytes,
			Tunnels: spec.DefaultTunnels, Handshakes: spec.DefaultHandshakes}
	}
	return f
}

// TestForFlockGolden shows the whole configuration of a three-agent flock
// with flock-proxy and the reader.
//
// Tier: unit (no root).
func TestForFlockGolden(t *testing.T) {
	t.Parallel()
	c := ForFlock(goldenFlock(), fixedKeys(t, slices.Concat(everyone, []string{creds.ProxyName, creds.ReaderName})...))
	data, err := c.marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/three-agents.json", string(data))
	if err := c.validate(); err != nil {
		t.Error(err)
	}
}

// TestForFlock checks who is left out and how lists are normalized.
//
// Tier: unit (no root).
func TestForFlock(t *testing.T) {
	t.Parallel()
	keys := fixedKeys(t, everyone...)
	names := func(c Config) string {
		var l []string
		for _, u := range c.Users {
			l = append(l, u.Name)
		}
		return strings.Join(l, " ")
	}
	for _, tc := range []struct {
		name  string
		flock func(*spec.Flock)
		drop  []string
		users string // names in order
		check func(t *testing.T, c Config)
	}{
		{name: "everyone, agents by id then the operator", users: "flock-1 flock-2 flock-3 operator"},
		{name: "agents listed out of order", flock: func(f *spec.Flock) { f.Agents[0], f.Agents[2] = f.Agents[2], f.Agents[0] },
			users: "flock-1 flock-2 flock-3 operator"},
		{name: "an agent without a key is left out", drop: []string{"flock-2"}, users: "flock-1 flock-3 operator"},
		{name: "no operator key", drop: []string{creds.OperatorName}, users: "flock-1 flock-2 flock-3"},
		{name: "no agents", flock: func(f *spec.Flock) { f.Agents = nil }, users: "operator"},
		{name: "no keys at all", drop: everyone, users: "", check: func(t *testing.T, c Config) {
			if c.Users == nil {
				t.Error("Users is nil; JSON would say null")
			}
		}},
		{name: "grants are sorted and deduplicated", flock: func(f *spec.Flock) {
			f.Agents[1].Subjects = spec.Subjects{Publish: []string{"reports.>", "alerts.x", "reports.>"}, Subscribe: []string{"news.>"}}
		}, users: "flock-1 flock-2 flock-3 operator", check: func(t *testing.T, c Config) {
			w := c.Users[1]
			if got := strings.Join(w.Publish, " "); got != "agent.2.> alerts.x reports.>" {
				t.Errorf("worker publish %s", got)
			}
			if got := strings.Join(w.Subscribe, " "); got != "_INBOX.flock-2.> broadcast news.>" {
				t.Errorf("worker subscribe %s", got)
			}
		}},
		{name: "no one answers requests: tasks come from the bus's streams", flock: func(f *spec.Flock) { f.Agents[1].TaskTimeout = 5 * time.Second },
			users: "flock-1 flock-2 flock-3 operator", check: func(t *testing.T, c Config) {
				for _, u := range c.Users {
					if u.ResponseTTL != 0 {
						t.Errorf("%s may answer requests for %s", u.Name, u.ResponseTTL)
					}
				}
			}},
		{name: "workers get consumers; the result window covers every delivery of the longest task", flock: func(f *spec.Flock) {
			f.Agents[2] = spec.Agent{ID: 3, Role: spec.RoleWorker, TaskTimeout: time.Hour}
			f.Bus.MaxDeliveries, f.Bus.StoreMax, f.Bus.Sync = 3, 2<<30, time.Second
		}, users: "flock-1 flock-2 flock-3 operator", check: func(t *testing.T, c Config) {
			want := Tasks{StoreMax: 2 << 30, MemoryMax: DefaultMemoryMax, MaxDeliveries: 3, AckWait: DefaultAckWait, ResultWindow: 3 * (time.Hour + DefaultAckWait), Sync: time.Second, Workers: []int{2, 3}}
			if !reflect.DeepEqual(c.Tasks.withDefaults(), want) {
				t.Errorf("tasks %+v, want %+v", c.Tasks, want)
			}
		}},
		{name: "the result window stops at the results' age", flock: func(f *spec.Flock) {
			f.Agents[1].TaskTimeout = 24 * time.Hour
			f.Bus.MaxDeliveries = 100
		}, users: "flock-1 flock-2 flock-3 operator", check: func(t *testing.T, c Config) {
			if c.Tasks.ResultWindow != ResultsMaxAge {
				t.Errorf("result window %s, want %s", c.Tasks.ResultWindow, ResultsMaxAge)
			}
		}},
		{name: "monitoring off", flock: func(f *spec.Flock) { f.Bus.MonitorPort = 0 }, users: "flock-1 flock-2 flock-3 operator",
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:4222" || c.Monitor != "" {
					t.Errorf("listen %q monitor %q", c.Listen, c.Monitor)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goldenFlock()
			if tc.flock != nil {
				tc.flock(f)
			}
			k := map[string]string{}
			for n, v := range keys {
				if !slices.Contains(tc.drop, n) {
					k[n] = v
				}
			}
			c := ForFlock(f, k)
			if got := names(c); got != tc.users {
				t.Errorf("users %q, want %q", got, tc.users)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestConfigFile checks the round trip through the file and the errors of
// a file that is not a bus configuration.
//
// Tier: unit (no root).
func TestConfigFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "etc", "flock")
	path := filepath.Join(dir, "bus.json")
	c := ForFlock(goldenFlock(), fixedKeys(t, everyone...))
	if err := WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(c) {
		t.Errorf("read back %+v\nwrote %+v", got, c)
	}
	for p, want := range map[string]os.FileMode{path: 0o644, dir: 0o755 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	// Rewriting keeps the mode even if someone changed it.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode() != 0o644 {
		t.Errorf("rewritten with mode %v", fi.Mode())
	}

	for _, tc := range []struct {
		name, content, want string
	}{
		{"not JSON", "listen: x", "decoding bus configuration " + path},
		{"unknown field", `{"listen":"127.0.0.1:4222","users":[],"jetstream":true}`, `unknown field "jetstream"`},
		{"bad key", `{"listen":"127.0.0.1:4222","users":[{"name":"operator","nkey":"SUABC"}]}`, `"SUABC" is not a public user nkey`},
		{"bad listen", `{"listen":"127.0.0.1","users":[]}`, "bus configuration " + path + ": listen:"},
		{"tiny store", `{"listen":"127.0.0.1:4222","users":[],"tasks":{"store_max":1024}}`, "tasks: store_max 1024 is below 67108864 bytes"},
		{"negative sync", `{"listen":"127.0.0.1:4222","users":[],"tasks":{"sync":-1}}`, "tasks: negative sync -1ns (0 is always)"},
		{"workers unsorted", `{"listen":"127.0.0.1:4222","users":[],"tasks":{"workers":[3,2]}}`, "tasks: workers: [3 2] is not a sorted list of distinct agent ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadConfig(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadConfig: %v, want it to say %q", err, tc.want)
			}
		})
	}
	if _, err := ReadConfig(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("ReadConfig of a missing file: %v", err)
	}
}

// TestEqual checks that Equal compares contents, nil and empty lists alike.
//
// Tier: unit (no root).
func TestEqual(t *testing.T) {
	t.Parallel()
	base := func() Config {
		return Config{Listen: "127.0.0.1:4222", Users: []User{{Name: "flock-1", Agent: 1, Nkey: "U1", Publish: []string{"a"}, Subscribe: []string{}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		equal  bool
	}{
		{"same", func(*Config) {}, true},
		{"nil list for empty", func(c *Config) { c.Users[0].Subscribe = nil }, true},
		{"another listen", func(c *Config) { c.Listen = "127.0.0.1:4223" }, false},
		{"monitoring on", func(c *Config) { c.Monitor = "127.0.0.1:8222" }, false},
		{"metrics on", func(c *Config) { c.Metrics = "127.0.0.1:8223" }, false},
		{"another key", func(c *Config) { c.Users[0].Nkey = "U2" }, false},
		{"another grant", func(c *Config) { c.Users[0].Publish = []string{"b"} }, false},
		{"another ttl", func(c *Config) { c.Users[0].ResponseTTL = time.Second }, false},
		{"the default store written out", func(c *Config) { c.Tasks.StoreMax = DefaultStoreMax }, true},
		{"another store", func(c *Config) { c.Tasks.StoreMax = 2 << 30 }, false},
		{"another max deliveries", func(c *Config) { c.Tasks.MaxDeliveries = 7 }, false},
		{"always written out", func(c *Config) { c.Tasks.Sync = spec.SyncAlways }, true},
		{"a sync interval", func(c *Config) { c.Tasks.Sync = time.Second }, false},
		{"one more worker", func(c *Config) { c.Tasks.Workers = []int{1} }, false},
		{"one more user", func(c *Config) { c.Users = append(c.Users, User{Name: creds.OperatorName}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(&c)
			if got := base().Equal(c); got != tc.equal {
				t.Errorf("Equal = %v, want %v", got, tc.equal)
			}
		})
	}
}

// Digest changes with every field that configures the bus, and only
// with those: a nil and an empty list are the same.
func TestDigestIsEqual(t *testing.T) {
	t.Parallel()
	base := func() Config {
		return ForFlock(goldenFlock(), fixedKeys(t, "flock-1", "flock-2", "flock-3", creds.OperatorName))
	}
	if base().Digest() != base().Digest() {
		t.Fatal("the same config has two digests")
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		same bool
	}{
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:4333" }, false},
		{"monitor", func(c *Config) { c.Monitor = "" }, false},
		{"metrics", func(c *Config) { c.Metrics = "127.0.0.1:9999" }, false},
		{"uid base", func(c *Config) { c.UIDBase++ }, false},
		{"a user's key", func(c *Config) { c.Users[0].Nkey = c.Users[1].Nkey }, false},
		{"a publish grant", func(c *Config) { c.Users[0].Publish = append(c.Users[0].Publish, "x") }, false},
		{"a grant moved between lists", func(c *Config) {
			c.Users[0].Subscribe = append(c.Users[0].Subscribe, c.Users[0].Publish[len(c.Users[0].Publish)-1])
			c.Users[0].Publish = c.Users[0].Publish[:len(c.Users[0].Publish)-1]
		}, false},
		{"a user fewer", func(c *Config) { c.Users = c.Users[1:] }, false},
		{"the response ttl", func(c *Config) { c.Users[0].ResponseTTL++ }, false},
		{"max deliveries", func(c *Config) { c.Tasks.MaxDeliveries = 9 }, false},
		{"sync", func(c *Config) { c.Tasks.Sync = 2 * time.Minute }, false},
		{"workers", func(c *Config) { c.Tasks.Workers = append(c.Tasks.Workers, 9) }, false},
		{"a default written out", func(c *Config) { c.Tasks.MemoryMax = DefaultMemoryMax }, true},
		{"nil for an empty list", func(c *Config) { c.Users[0].Subscribe = []string{}; c.Users[1].Subscribe = nil }, true},
	} {
		c := base()
		if tc.name == "nil for an empty list" {
			c.Users[0].Subscribe, c.Users[1].Subscribe = nil, []string{}
		}
		want := c.Digest()
		tc.edit(&c)
		if got := c.Digest(); (got == want) != tc.same {
			t.Errorf("%s: digest same = %v, want %v", tc.name, got == want, tc.same)
		}
	}
}
