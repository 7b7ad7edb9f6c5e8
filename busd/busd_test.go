package busd

// Tier: unit (an in-process bus on loopback; systemd's units and the
// firewall's counters are their packages' fakes).

import (
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// config is the bus provision writes for agents 1 and 2, on a free port,
// with the operator's user when operator is set.
func config(t *testing.T, operator bool) bus.Config {
	t.Helper()
	f := &spec.Flock{UIDBase: spec.DefaultUIDBase, Bus: spec.Bus{Host: "127.0.0.1", Port: -1}, Agents: []spec.Agent{
		{ID: 1, Role: spec.RoleOrchestrator, TaskTimeout: spec.DefaultTimeout},
		{ID: 2, Role: spec.RoleWorker, TaskTimeout: spec.DefaultTimeout},
	}}
	names := []string{"flock-1", "flock-2"}
	if operator {
		names = append(names, creds.OperatorName)
	}
	keys := map[string]string{}
	for _, n := range names {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[n], _ = kp.PublicKey()
	}
	return bus.ForFlock(f, keys)
}

// loopbackPort is a loopback address free a moment ago.
func loopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start writes c and starts the service on it with the fakes; /metrics
// gets another free port if its own was taken in between.
func start(t *testing.T, c bus.Config, u *units.Fake) (*Service, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bus.json")
	for try := 0; ; try++ {
		c.Metrics = loopbackPort(t)
		if err := bus.WriteConfig(path, c); err != nil {
			t.Fatal(err)
		}
		s, err := Start(Options{ConfigPath: path, StoreDir: t.TempDir(), Units: u, Firewall: netpolicy.NewFake()})
		if err != nil && strings.Contains(err.Error(), "listening for /metrics") && try < 5 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s, path
	}
}

func scrape(addr net.Addr) (string, error) {
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return string(b), err
}

// The service starts the bus and serves /metrics on the config's address
// with systemd's units as the fake has them; a reload takes new users and
// refuses a new metrics address, naming the restart; at Close both stop.
func TestServiceServesMetricsAndReloads(t *testing.T) {
	u := units.NewFake()
	if err := u.Start(t.Context(), units.Unit{Name: spec.UnitName(1)}); err != nil {
		t.Fatal(err)
	}
	s, path := start(t, config(t, false), u)
	if _, err := net.Dial("tcp", strings.TrimPrefix(s.ClientURL(), "nats://")); err != nil {
		t.Fatalf("the bus: %v", err)
	}
	body, err := scrape(s.MetricsAddr())
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	for _, want := range []string{`flock_agent_up{agent="1"} 1`, `flock_agent_up{agent="2"} 0`,
		`flock_collector_success{source="bus"} 1`, `flock_collector_success{source="systemd"} 1`, `flock_collector_success{source="firewall"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}

	c := config(t, true)
	c.Metrics = s.MetricsAddr().String()
	if err := bus.WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Errorf("reloading with the operator's user: %v", err)
	}
	c.Metrics = loopbackPort(t)
	if err := bus.WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "systemctl restart flock.service") {
		t.Errorf("reloading with a new metrics address: %v, want the restart named", err)
	}

	addr := s.MetricsAddr()
	s.Close()
	if _, err := scrape(addr); err == nil {
		t.Error("/metrics still answers after Close")
	}
}

// Without a store there is nothing to keep tasks in: refused, naming the
// flag and the unit.
func TestServiceNeedsAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus.json")
	if err := bus.WriteConfig(path, config(t, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Options{ConfigPath: path}); err == nil || !strings.Contains(err.Error(), "give --store DIR") {
		t.Errorf("Start without a store: %v", err)
	}
}
