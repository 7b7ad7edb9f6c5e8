package test

// Tier: root + nspawn + Debian's prometheus (promtool, prometheus) and
// curl. flock.service's /metrics as an operator meets it: root scrapes it
// and promtool finds nothing to lint, an agent cannot reach it, an agent's
// refused packets are counted on it alone (through the counters socket,
// which no agent can connect to), a real Prometheus scrapes it with the
// config docs/metrics.md shows and answers queries, and a change of bus.metrics takes
// effect on the next provision.

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/counters"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/units"
)

// metricsSpec: agent 1 the hostile probe, with the widest allowance an
// operator can write and a name (so the flock runs its egress proxy);
// agent 2 a worker that upper-cases its task.
const metricsSpec = `defaults:
  heartbeat: 2s
agents:
  - id: 1
    exec: ["/usr/local/bin/probe", "serve"]
    egress: ["0.0.0.0/0:*", "[::/0]:*", "api.flock.test:443"]
  - id: 2
    command: ["/usr/bin/tr", "a-z", "A-Z"]
`

const (
	metricsURL = "http://127.0.0.1:8223/metrics"
	promListen = "127.0.0.1:9090"
)

func TestMetrics(t *testing.T) {
	harness.MetricsTier.Require(t)
	m := harness.Boot(t)
	provision(t, m, metricsSpec)
	waitActive(t, m, 1, 2)
	waitBus(t, m, time.Time{}, 2)

	var expo string
	t.Run("root scrapes /metrics and promtool finds nothing to lint", func(t *testing.T) {
		// The first scrape may come before agent 2's first heartbeat
		// reached the bus; poll for the families the test reads.
		m.Eventually(t, 30*time.Second, func() error {
			out, errOut, err := run(t, m, "curl", "-fsS", metricsURL)
			if err != nil {
				return fmt.Errorf("curl %s: %v %s", metricsURL, err, errOut)
			}
			expo = out
			for _, want := range []string{
				`flock_agent_up{agent="1"} 1`, `flock_agent_up{agent="2"} 1`,
				`flock_agents{state="active"} 2`,
				`flock_agent_heartbeat_age_seconds{agent="2"}`,
				`flock_agent_restarts_total{agent="2"} 0`,
				`flock_store_max_bytes 1.073741824e+09`,
				// systemd answered over the system bus, as flock.service's
				// DynamicUser, with no capabilities.
				`flock_collector_success{source="systemd"} 1`, `flock_collector_success{source="bus"} 1`,
				// The firewall's counters, from flock-counters.socket's reader.
				`flock_collector_success{source="firewall"} 1`, `flock_agent_refused_packets_total{agent="2"} 0`,
			} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("no %q in /metrics", want)
				}
			}
			return nil
		})
		// The bus keeps one connection to the system bus across scrapes.
		for i := range 3 {
			if out := mustRun(t, m, "curl", "-fsS", metricsURL); !strings.Contains(out, `flock_collector_success{source="systemd"} 1`) {
				t.Errorf("scrape %d after the first: systemd not read", i+2)
			}
		}
		if err := m.WriteFile("/root/metrics.txt", []byte(expo), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, err := run(t, m, "sh", "-c", "promtool check metrics < /root/metrics.txt"); err != nil {
			t.Errorf("promtool check metrics on the live /metrics: %v\n%s%s", err, out, errOut)
		}
		// What systemd gives in this machine: cgroup figures are there only
		// where accounting is (the VM tier has full cgroup v2).
		for _, fam := range []string{"flock_agent_memory_bytes", "flock_agent_memory_peak_bytes", "flock_agent_cpu_seconds_total"} {
			t.Logf("%s: %s", fam, map[bool]string{true: "present", false: "absent (systemd has no figure here)"}[strings.Contains(expo, fam+"{")])
		}
		t.Logf("a sample of the live /metrics:\n%s", sample(expo))
	})

	t.Run("an agent cannot reach /metrics", func(t *testing.T) {
		p := startedProbe(t, m, 1)
		r := p.do(t, map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:8223"})
		if r.OK {
			t.Errorf("ESCAPE: agent 1 connected to /metrics: %s", r.Detail)
		} else {
			t.Logf("agent 1 (egress 0.0.0.0/0:*) connecting to 127.0.0.1:8223: refused (%s) in %.1f ms", r.Err, r.ElapsedMS)
		}
		// Root's control: the port the agent could not reach is listening.
		if out, errOut, err := run(t, m, probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:8223"}`); err != nil || !strings.Contains(out, `"ok":true`) {
			t.Errorf("control: root connects to /metrics: %v %s %s", err, out, errOut)
		}
	})

	t.Run("agent 1's refused connect is counted in /metrics, on agent 1 alone", func(t *testing.T) {
		const one, two = `flock_agent_refused_packets_total{agent="1"}`, `flock_agent_refused_packets_total{agent="2"}`
		var before float64
		m.Eventually(t, 30*time.Second, func() error {
			out, err := scrape(t, m, `flock_collector_success{source="firewall"} 1`)
			if err != nil {
				return err
			}
			var ok bool
			if before, ok = seriesValue(out, one); !ok {
				return fmt.Errorf("no %s in /metrics", one)
			}
			return nil
		})
		p := startedProbe(t, m, 1)
		if r := p.do(t, map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:9"}); r.OK {
			t.Fatalf("ESCAPE: agent 1 connected to 127.0.0.1:9: %s", r.Detail)
		}
		asked := time.Now()
		m.Eventually(t, 30*time.Second, func() error {
			out, err := scrape(t, m, `flock_collector_success{source="firewall"} 1`)
			if err != nil {
				return err
			}
			if v, ok := seriesValue(out, one); !ok || v < before+1 {
				return fmt.Errorf("%s is %v (%v), want at least %v", one, v, ok, before+1)
			}
			if v, ok := seriesValue(out, two); !ok || v != 0 {
				return fmt.Errorf("%s is %v (%v), want 0: only agent 1 was refused", two, v, ok)
			}
			return nil
		})
		t.Logf("agent 1's refused connect counted in /metrics %s after it (refused packets before it: %v, from its earlier probes); agent 2's: 0",
			time.Since(asked).Round(time.Millisecond), before)
		// One scrape, at most one reader (scrapes under a second apart
		// share one).
		n := socketAccepted(t, m)
		if _, err := scrape(t, m); err != nil {
			t.Fatal(err)
		}
		if more := socketAccepted(t, m) - n; more > 1 {
			t.Errorf("one scrape started %d readers, want at most 1", more)
		}
		// What the reader answered, asked as the bus asks (root may too):
		// agent 1's uid with what /metrics said.
		answer := readCounters(t, m)
		t.Logf("the counters reader's answer to root: %s", answer)
		if !strings.Contains(answer, fmt.Sprintf(`"%d":{"refused":`, spec.DefaultUIDBase+1)) {
			t.Errorf("no uid %d in the reader's answer %s", spec.DefaultUIDBase+1, answer)
		}
	})

	t.Run("an agent cannot connect to the counters socket", func(t *testing.T) {
		if out := strings.TrimSpace(mustRun(t, m, "stat", "-c", "%U:%G %a %F", counters.SocketPath)); out != "flock-bus:flock-bus 600 socket" {
			t.Errorf("%s is %q, want flock-bus:flock-bus 600 socket", counters.SocketPath, out)
		}
		p := startedProbe(t, m, 1)
		req := map[string]any{"op": "connect-unix", "addr": counters.SocketPath}
		if r := p.do(t, req); r.OK {
			t.Errorf("ESCAPE: agent 1 connected to %s: %s", counters.SocketPath, r.Detail)
		} else {
			t.Logf("agent 1 connecting to %s: refused (%s)", counters.SocketPath, r.Err)
		}
		// Root's control in agent 1's own namespaces: the socket is there,
		// and only its owner and mode keep the agent out.
		if r := asRootInside(t, m, p.pid, req); !r.OK {
			t.Errorf("control: root in agent 1's namespaces connecting to %s: %s", counters.SocketPath, r.Err)
		}
		// Were the mode loosened, the reader still answers only root and
		// the bus, by the peer's credentials, and says so in the journal
		// (where its start and end, at every scrape, are not).
		mustRun(t, m, "chmod", "0666", counters.SocketPath)
		out := mustRun(t, m, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			"curl", "-sS", "--http0.9", "--unix-socket", counters.SocketPath, "http://counters/")
		mustRun(t, m, "chmod", "0600", counters.SocketPath)
		if !strings.Contains(out, `"error":"uid 65534 may not read`) || strings.Contains(out, `"refused":{"`) {
			t.Errorf("nobody through a loosened socket: %s, want a refusal and no counters", out)
		}
		m.Eventually(t, 10*time.Second, func() error {
			// Until the reader's line is in the journal, journalctl
			// finds no unit of the pattern and exits 1: asked again.
			j, stderr, err := run(t, m, "journalctl", "--no-pager", "-o", "cat", "-u", "flock-counters@*")
			if err != nil {
				return fmt.Errorf("journalctl: %v: %s", err, stderr)
			}
			if !strings.Contains(j, "uid 65534 may not read") {
				return fmt.Errorf("the reader's refusal is not in its journal:\n%s", j)
			}
			if strings.Contains(j, "Started ") {
				return fmt.Errorf("every reader's start is in the journal:\n%s", j)
			}
			return nil
		})
	})

	t.Run("the counters socket stopped: the firewall's figures are absent, status says so, provision repairs it", func(t *testing.T) {
		mustRun(t, m, "systemctl", "stop", units.CountersSocket)
		m.Eventually(t, 30*time.Second, func() error {
			out, err := scrape(t, m, `flock_collector_success{source="firewall"} 0`)
			if err == nil && strings.Contains(out, "flock_agent_refused_packets_total{") {
				return fmt.Errorf("refused packets in /metrics with no reader to ask")
			}
			return err
		})
		if out := statusOut(t, m); !strings.Contains(out, units.CountersSocket) {
			t.Errorf("flockctl status does not name %s:\n%s", units.CountersSocket, out)
		}
		provision(t, m, metricsSpec)
		m.Eventually(t, 30*time.Second, func() error {
			_, err := scrape(t, m, `flock_collector_success{source="firewall"} 1`, `flock_agent_refused_packets_total{agent="1"}`)
			return err
		})
	})

	t.Run("agent 1's bus violation and egress denial are counted, on agent 1", func(t *testing.T) {
		p := startedProbe(t, m, 1)
		if r := p.do(t, map[string]any{"op": "nats-pub", "name": "agent.2.heartbeat"}); r.OK {
			t.Fatalf("ESCAPE: agent 1 published as agent 2: %s", r.Detail)
		}
		if r := p.do(t, map[string]any{"op": "proxy-connect", "addr": "evil.flock.test:443", "name": "evil.flock.test"}); r.OK || !strings.Contains(r.Err, "403") {
			t.Fatalf("agent 1 through the proxy to a name not in its egress: %s, want a 403", r)
		}
		m.Eventually(t, 30*time.Second, func() error {
			out, errOut, err := run(t, m, "curl", "-fsS", metricsURL)
			if err != nil {
				return fmt.Errorf("curl %s: %v %s", metricsURL, err, errOut)
			}
			for series, want := range map[string]float64{
				`flock_agent_bus_violations_total{agent="1",kind="publish"}`:    1,
				`flock_agent_egress_decisions_total{agent="1",decision="deny"}`: 1,
				`flock_agent_egress_decisions_total{agent="2",decision="deny"}`: 0,
			} {
				if v, ok := seriesValue(out, series); !ok || v < want || (want == 0 && v != 0) {
					return fmt.Errorf("%s is %v (%v) in /metrics, want %v", series, v, ok, map[bool]string{true: "0", false: "at least " + fmt.Sprint(want)}[want == 0])
				}
			}
			if strings.Contains(out, `flock_agent_bus_violations_total{agent="2"`) {
				return fmt.Errorf("agent 2 has violations in /metrics; only agent 1 broke a rule")
			}
			return nil
		})
	})

	t.Run("a real Prometheus scrapes it: agents up, a task counter moves after flockctl send", func(t *testing.T) {
		startPrometheus(t, m)
		// Prometheus's own word that the target is scraped.
		waitQuery(t, m, `up{job="flock"}`, func(r []promSample) error {
			if len(r) != 1 || r[0].value != 1 {
				return fmt.Errorf("up{job=flock} = %v, want one sample of 1", r)
			}
			return nil
		})
		waitQuery(t, m, `flock_agent_up`, func(r []promSample) error {
			up := map[string]float64{}
			for _, s := range r {
				up[s.metric["agent"]] = s.value
			}
			if len(up) != 2 || up["1"] != 1 || up["2"] != 1 {
				return fmt.Errorf("flock_agent_up by agent %v, want agents 1 and 2 at 1", up)
			}
			return nil
		})
		const done = `flock_agent_tasks_total{agent="2",result="ok"}`
		var before float64
		waitQuery(t, m, done, func(r []promSample) error {
			if len(r) != 1 {
				return fmt.Errorf("%s: %v, want one sample", done, r)
			}
			before = r[0].value
			return nil
		})
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "hello metrics")); out != "HELLO METRICS" {
			t.Fatalf("flockctl send --to 2: %q", out)
		}
		sent := time.Now()
		waitQuery(t, m, done, func(r []promSample) error {
			if len(r) != 1 || r[0].value != before+1 {
				return fmt.Errorf("%s: %v, want %v", done, r, before+1)
			}
			return nil
		})
		t.Logf("%s went from %v to %v in Prometheus %s after the send (scrape_interval 1s)", done, before, before+1, time.Since(sent).Round(time.Millisecond))
	})

	t.Run("bus.metrics moved, then off, takes effect on the next provision", func(t *testing.T) {
		provision(t, m, "bus:\n  metrics: 127.0.0.1:8224\n"+metricsSpec)
		m.Eventually(t, 30*time.Second, func() error {
			if _, errOut, err := run(t, m, "curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8224/metrics"); err != nil {
				return fmt.Errorf("the new address: %v %s", err, errOut)
			}
			return nil
		})
		if _, _, err := run(t, m, "curl", "-fsS", "-o", "/dev/null", metricsURL); err == nil {
			t.Errorf("the old address still serves /metrics")
		}
		provision(t, m, "bus:\n  metrics: off\n"+metricsSpec)
		waitActive(t, m, 1, 2)
		for _, port := range []string{"8223", "8224"} {
			if out := mustRun(t, m, "ss", "-Hltn", "sport = :"+port); strings.TrimSpace(out) != "" {
				t.Errorf("metrics off, yet something listens on %s:\n%s", port, out)
			}
		}
		// Nobody to ask the firewall's counters: no reader either.
		for _, f := range []string{counters.SocketPath, "/etc/systemd/system/" + units.CountersSocket, "/etc/systemd/system/" + units.CountersTemplate} {
			if _, errOut, err := run(t, m, "test", "!", "-e", f); err != nil {
				t.Errorf("metrics off, yet %s is there %s", f, errOut)
			}
		}
	})
}

// startPrometheus runs Debian's prometheus in the machine with the job of
// examples/prometheus.yml (which docs/metrics.md shows), scraping every second,
// its storage in a fresh directory; stopped with the machine.
func startPrometheus(t *testing.T, m *harness.Machine) {
	t.Helper()
	job, err := os.ReadFile("../examples/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(job), "scrape_interval: 15s", "scrape_interval: 1s", 1)
	if cfg == string(job) {
		t.Fatal("examples/prometheus.yml has no scrape_interval: 15s to shorten")
	}
	if err := m.WriteFile("/root/prometheus.yml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, m, "systemd-run", "--unit=test-prometheus", "--property=StateDirectory=test-prometheus",
		"/usr/bin/prometheus", "--config.file=/root/prometheus.yml", "--storage.tsdb.path=/var/lib/test-prometheus",
		"--web.listen-address="+promListen)
}

// promSample is one sample of an instant query's answer.
type promSample struct {
	metric map[string]string
	value  float64
}

// query asks Prometheus's HTTP API for expr now.
func query(t *testing.T, m *harness.Machine, expr string) ([]promSample, error) {
	out, errOut, err := run(t, m, "curl", "-fsS", "-G", "http://"+promListen+"/api/v1/query", "--data-urlencode", "query="+expr)
	if err != nil {
		return nil, fmt.Errorf("query %s: %v %s", expr, err, errOut)
	}
	var resp struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Status != "success" {
		return nil, fmt.Errorf("query %s: %v: %s", expr, err, out)
	}
	var r []promSample
	for _, s := range resp.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", expr, s.Value, err)
		}
		r = append(r, promSample{metric: s.Metric, value: v})
	}
	return r, nil
}

// waitQuery polls expr until check accepts its answer.
func waitQuery(t *testing.T, m *harness.Machine, expr string, check func([]promSample) error) {
	t.Helper()
	m.Eventually(t, time.Minute, func() error {
		r, err := query(t, m, expr)
		if err != nil {
			return err
		}
		return check(r)
	})
}

// sample is the first lines of each flock_ family, for the log.
func sample(expo string) string {
	var b strings.Builder
	n := 0
	for _, l := range strings.Split(expo, "\n") {
		switch {
		case strings.HasPrefix(l, "# HELP flock_"):
			n = 0
		case strings.HasPrefix(l, "flock_") && n < 2:
			b.WriteString(l + "\n")
			n++
		}
	}
	return b.String()
}

// readCounters is the answer of flock-counters.socket's reader as root
// reads it (curl takes the JSON for an HTTP/0.9 answer).
func readCounters(t *testing.T, m *harness.Machine) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, m, "curl", "-sS", "--http0.9", "--unix-socket", counters.SocketPath, "http://counters/"))
}

// socketAccepted is how many connections flock-counters.socket accepted:
// one reader each.
func socketAccepted(t *testing.T, m *harness.Machine) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "NAccepted", "--value", units.CountersSocket)))
	if err != nil {
		t.Fatalf("NAccepted of %s: %v", units.CountersSocket, err)
	}
	return n
}

// scrape is root's scrape of /metrics once it has every want.
func scrape(t *testing.T, m *harness.Machine, want ...string) (string, error) {
	out, errOut, err := run(t, m, "curl", "-fsS", metricsURL)
	if err != nil {
		return "", fmt.Errorf("curl %s: %v %s", metricsURL, err, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			return out, fmt.Errorf("no %q in /metrics", w)
		}
	}
	return out, nil
}

// seriesValue is the value of one series (name and labels, as the text
// exposition writes them) in expo.
func seriesValue(expo, series string) (float64, bool) {
	for _, l := range strings.Split(expo, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(rest, 64)
			return f, err == nil
		}
	}
	return 0, false
}
