package test

// Tier: root + nspawn. The bus as agents and operators meet it: the real
// flock.service (flockctl serve under systemd), real units with their
// credentials, the real nftables table, and agents trying to get round it.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/transcript"
)

// busSpec: agent 1 is the hostile probe, holding the widest allowance an
// operator can write (which must still not open this host), 2 a worker
// that upper-cases its task, 3 a monitor (flock-agent's own program), 4 a
// worker whose task can hang or flood its output. Heartbeats every 2 s so
// the test sees them without waiting 30 s. Agents 1 and 2 have names in
// their egress, so the flock runs its proxy.
const busSpec = `defaults:
  heartbeat: 2s
agents:
  - id: 1
    exec: ["/usr/local/bin/probe", "serve"]
    egress: ["0.0.0.0/0:*", "[::/0]:*", "0.0.0.0/0:*/udp", "[::/0]:*/udp", "api.flock.test:443", "host.flock.test:443", "rebind.flock.test:443"]
  - id: 2
    command: ["/usr/bin/tr", "a-z", "A-Z"]
    egress: ["other.flock.test:443"]
  - id: 3
    role: monitor
  - id: 4
    command: ["/bin/sh", "-c", "read x; case $x in hang) sleep 60;; flood) yes;; esac; echo \"done $x\""]
    task_timeout: 2s
    max_output: 1K
`

// madeUpLease is a lease for a guessed delivery of the shared queue's
// first task, with a MAC of zeros: what a worker that never held the task
// could send.
var madeUpLease = base64.RawURLEncoding.EncodeToString([]byte("$JS.ACK.TASKS.worker.1.1.1.1.0")) + "." +
	base64.RawURLEncoding.EncodeToString(make([]byte, 16))

func TestBus(t *testing.T) {
	// Tier: root + nspawn (+ the nats CLI, which make deps installs).
	natsCLI := harness.BusTier.Tool(t, "nats")
	curl := harness.BusTier.Tool(t, "curl")
	m := harness.BootWith(t, harness.Options{Binaries: map[string]string{"nats": natsCLI}})
	provision(t, m, busSpec)
	waitActive(t, m, 1, 2, 3, 4)

	t.Run("flock.service is a notify unit, enabled, not root", func(t *testing.T) {
		props := parseProps(mustRun(t, m, "systemctl", "show", "flock.service",
			"-p", "Type", "-p", "ActiveState", "-p", "UnitFileState", "-p", "DynamicUser", "-p", "MainPID"))
		if props["Type"] != "notify" || props["ActiveState"] != "active" || props["UnitFileState"] != "enabled" || props["DynamicUser"] != "yes" {
			t.Errorf("flock.service: %v", props)
		}
		uid := strings.TrimSpace(mustRun(t, m, "ps", "-o", "uid=", "-p", props["MainPID"]))
		if uid == "0" {
			t.Errorf("the bus runs as root")
		}
		e := unitExposure(t, m, "flock.service")
		if e > 2 {
			t.Errorf("systemd-analyze security flock.service: %.1f, want at most 2 (OK)", e)
		}
		t.Logf("flock.service runs as uid %s; systemd-analyze security: %.1f", uid, e)
	})

	// Agents that run flock-agent connect and heartbeat.
	busUp := waitBus(t, m, time.Time{}, 2, 3, 4)
	t.Logf("agents 2, 3, 4 connected and heartbeating by %s; flockctl status:\n%s", busUp.Format(time.RFC3339Nano), statusOut(t, m))

	t.Run("a task round-trips through flockctl send", func(t *testing.T) {
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "hello flock")); out != "HELLO FLOCK" {
			t.Errorf("flockctl send --to 2: %q", out)
		}
		// --to worker (the default): whichever worker takes it answers.
		want := map[int]string{2: "X", 4: "done x\n"}
		seen := map[int]bool{}
		for i := 0; i < 20 && len(seen) < 2; i++ {
			var res struct {
				TaskID string `json:"task_id"`
				Agent  int    `json:"agent"`
				OK     bool   `json:"ok"`
				Output string `json:"output"`
			}
			id := fmt.Sprintf("t-%d", i)
			out := mustRun(t, m, "flockctl", "send", "--id", id, "--output", "json", "x")
			if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.TaskID != id || want[res.Agent] != res.Output {
				t.Fatalf("flockctl send --output json: %v\n%s", err, out)
			}
			seen[res.Agent] = true
		}
		t.Logf("tasks to any worker were taken by agents %v", seen)
	})

	t.Run("a hanging task fails at its timeout, not later", func(t *testing.T) {
		start := time.Now()
		_, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "hang")
		took := time.Since(start)
		if err == nil || !strings.Contains(stderr, "timed out after 2s") {
			t.Errorf("want a failed result naming the timeout; err %v, stderr %q", err, stderr)
		}
		t.Logf("hanging task failed after %s (task_timeout 2s)", took.Round(time.Millisecond))
	})

	t.Run("a flooding task is stopped at max_output and fails", func(t *testing.T) {
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "--output", "json", "flood")
		var res struct {
			OK        bool   `json:"ok"`
			Truncated bool   `json:"truncated"`
			Output    string `json:"output"`
			Error     string `json:"error"`
		}
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || err == nil || res.OK || !res.Truncated || len(res.Output) > 1024 ||
			!strings.Contains(res.Error, "max_output") || !strings.Contains(stderr, "max_output") {
			t.Errorf("want a failed, truncated result naming max_output; err %v, stderr %q, result %s", err, stderr, out)
		}
	})

	t.Run("tasks are kept by the bus: --no-wait, a resent id, flockctl tasks", func(t *testing.T) {
		id := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "--id", "kept-1", "--no-wait", "later"))
		if id != "kept-1" {
			t.Fatalf("flockctl send --no-wait printed %q, want the task id", id)
		}
		// Sent again: not stored again, and --wait finds the first one's result.
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "2", "--id", "kept-1", "again")
		if err != nil || strings.TrimSpace(out) != "LATER" || !strings.Contains(stderr, "task kept-1 was already sent") {
			t.Errorf("resending kept-1: err %v, out %q, stderr %q", err, out, stderr)
		}
		var entries []struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			Subject string `json:"subject"`
			Agent   int    `json:"agent"`
		}
		out = mustRun(t, m, "flockctl", "tasks", "--output", "json")
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			t.Fatalf("flockctl tasks --output json: %v\n%s", err, out)
		}
		done := 0
		for _, e := range entries {
			if e.ID == "kept-1" && e.State == "done" && e.Subject == "tasks.agent.2" && e.Agent == 2 {
				done++
			}
		}
		if done != 1 {
			t.Errorf("flockctl tasks lists kept-1 done by agent 2 %d times:\n%s", done, out)
		}
		// The store is flock.service's StateDirectory, owned by its dynamic user.
		if out := mustRun(t, m, "ls", "/var/lib/private/flock-bus/jetstream/$G/streams"); !strings.Contains(out, "TASKS") || !strings.Contains(out, "RESULTS") || !strings.Contains(out, "DEAD") {
			t.Errorf("the bus's streams are not under its state directory: %q", out)
		}
		t.Logf("flockctl tasks:\n%s", mustRun(t, m, "flockctl", "tasks"))
	})

	t.Run("bad input to send names the fix and sends nothing", func(t *testing.T) {
		for argv, want := range map[string]string{
			"--to 3 x":       "agent 3 takes no tasks (role monitor)",
			"--to 9 x":       "no agent 9",
			"--to boss x":    `--to "boss": give worker`,
			"--output xml x": `--output "xml": choose text or json`,
		} {
			_, stderr, err := run(t, m, append([]string{"flockctl", "send"}, strings.Fields(argv)...)...)
			if err == nil || !strings.Contains(stderr, want) {
				t.Errorf("flockctl send %s: err %v, stderr %q, want %q", argv, err, stderr, want)
			}
		}
	})

	p := startedProbe(t, m, 1)
	t.Run("from inside an agent", func(t *testing.T) {
		type try struct {
			name    string
			req     map[string]any
			allowed bool
			want    string // in Err (refused) or Detail (allowed)
		}
		for _, tc := range []try{
			// Controls: what its role allows works, so a refusal below is
			// the server's and not a broken probe.
			{"connect with its own credential", map[string]any{"op": "nats-connect"}, true, "connected"},
			{"publish its own event", map[string]any{"op": "nats-pub", "name": "agent.1.events"}, true, "accepted"},
			{"subscribe its own inbox", map[string]any{"op": "nats-sub", "name": "_INBOX.flock-1.x"}, true, "accepted"},
			{"hand a task to a worker (orchestrators do)", map[string]any{"op": "nats-pub", "name": "tasks.agent.2"}, false, "Permissions Violation for Publish"},
			{"the nats CLI with NATS_URL and NATS_NKEY alone", map[string]any{"op": "exec", "argv": []string{"nats", "pub", "agent.1.events", "from the CLI"}}, true, "Published"},

			{"connect without a credential", map[string]any{"op": "nats-anon"}, false, "Authorization Violation"},
			{"publish as another agent", map[string]any{"op": "nats-pub", "name": "agent.2.heartbeat"}, false, "Permissions Violation for Publish"},
			// Results are handed to the bus's task desk with the lease of a
			// task held; a worker touches no JetStream subject.
			{"store a result around the desk", map[string]any{"op": "nats-pub", "name": "task.result"}, false, "Permissions Violation for Publish"},
			{"acknowledge a task around the desk", map[string]any{"op": "nats-pub", "name": "$JS.ACK.TASKS.worker.1.1.1.1.0"}, false, "Permissions Violation for Publish"},
			{"pull a task around the desk", map[string]any{"op": "nats-pub", "name": "$JS.API.CONSUMER.MSG.NEXT.TASKS.worker"}, false, "Permissions Violation for Publish"},
			{"hand in a result with a lease it made up", map[string]any{"op": "desk", "name": "agent.1.task.result", "data": madeUpLease}, false, "refused (forged-lease)"},
			{"hand in a result as another agent", map[string]any{"op": "nats-pub", "name": "agent.2.task.result"}, false, "Permissions Violation for Publish"},
			{"subscribe to another agent's inbox", map[string]any{"op": "nats-sub", "name": "_INBOX.flock-2.>"}, false, "Permissions Violation for Subscription"},
			{"subscribe to every subject", map[string]any{"op": "nats-sub", "name": ">"}, false, "Permissions Violation for Subscription"},
			{"ask the bus to reload", map[string]any{"op": "nats-pub", "name": "flock.bus.reload"}, false, "Permissions Violation for Publish"},
			{"read its own credential where NATS_NKEY says", map[string]any{"op": "read-file", "path": "/run/flock-agent/nats"}, true, ""},
			{"read another agent's credential (the original)", map[string]any{"op": "read-file", "path": "/var/lib/flock/creds/flock-2.nk"}, false, ""},
			{"read the operator's credential", map[string]any{"op": "read-file", "path": "/var/lib/flock/creds/operator.nk"}, false, ""},
			{"connect with another agent's credential", map[string]any{"op": "nats-connect", "path": "/var/lib/flock/creds/flock-2.nk"}, false, ""},
			{"reach the bus's monitoring port", map[string]any{"op": "connect-tcp", "addr": "127.0.0.1:8222"}, false, "connection refused"},
		} {
			r := p.do(t, tc.req)
			switch {
			case tc.allowed && !r.OK:
				t.Errorf("%s: refused (%s); the control failed, so the refusals prove nothing", tc.name, r.Err)
			case tc.allowed && !strings.Contains(r.Detail, tc.want):
				t.Errorf("%s: %q, want %q", tc.name, r.Detail, tc.want)
			case !tc.allowed && r.OK:
				t.Errorf("ESCAPE: %s worked: %s", tc.name, r.Detail)
			case !tc.allowed && !strings.Contains(r.Err, tc.want):
				t.Errorf("%s: refused with %q, want %q", tc.name, r.Err, tc.want)
			default:
				t.Logf("%-50s %s in %.1f ms", tc.name, map[bool]string{true: "allowed", false: "refused"}[tc.allowed], r.ElapsedMS)
			}
		}
		// Root's controls: the credential the agent could not read exists,
		// and the monitoring port it could not reach (with 0.0.0.0/0:*)
		// is listening.
		if b, err := m.ReadFile("/var/lib/flock/creds/flock-2.nk"); err != nil || !strings.HasPrefix(string(b), "SU") {
			t.Errorf("control: root reads agent 2's seed: %v", err)
		}
		if out, errOut, err := run(t, m, probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:8222"}`); err != nil || !strings.Contains(out, `"ok":true`) {
			t.Errorf("control: root connects to the monitoring port: %v %s %s", err, out, errOut)
		}
	})

	t.Run("egress by name: the proxy knows the agent by its uid", func(t *testing.T) {
		start := time.Now()
		tlsUpstream(t, m)
		show := mustRun(t, m, "systemctl", "show", "-p", "Type", "-p", "DynamicUser", "-p", "UnitFileState", "-p", "ActiveState", "flock-proxy.service")
		for _, want := range []string{"Type=notify", "DynamicUser=yes", "UnitFileState=enabled", "ActiveState=active"} {
			if !strings.Contains(show, want) {
				t.Errorf("flock-proxy.service: want %s in\n%s", want, show)
			}
		}
		invocation := func() string {
			return strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "--value", "flock-agent@1.service"))
		}
		before := invocation()

		// The operator hears every decision on the bus.
		mustRun(t, m, "systemd-run", "--unit=flock-test-egress-sub", "--collect",
			"-p", "StandardOutput=append:/run/egress-events", "-p", "StandardError=append:/run/egress-events",
			"-E", "NATS_URL=nats://127.0.0.1:4222", "-E", "NATS_NKEY=/var/lib/flock/creds/operator.nk",
			"/usr/local/bin/nats", "sub", "flock.egress.>")
		defer run(t, m, "systemctl", "stop", "flock-test-egress-sub.service")
		m.Eventually(t, 10*time.Second, func() error {
			if b, _ := m.ReadFile("/run/egress-events"); !strings.Contains(string(b), "Subscribing on") {
				return fmt.Errorf("the operator's subscription is not up: %q", b)
			}
			return nil
		})

		connect := func(target, sni string) map[string]any {
			return map[string]any{"op": "proxy-connect", "addr": target, "name": sni}
		}
		for _, tc := range []struct {
			name    string
			req     map[string]any
			allowed bool
			want    string
		}{
			{"the allowed name", connect("api.flock.test:443", "api.flock.test"), true, "hello from api.flock.test"},
			{"another name", connect("evil.flock.test:443", "evil.flock.test"), false, `403 Forbidden: flock proxy: agent 1: refused: CONNECT evil.flock.test:443: not in its egress; add "evil.flock.test:443" to agents[id=1].egress`},
			{"agent 2's name", connect("other.flock.test:443", "other.flock.test"), false, "403 Forbidden: flock proxy: agent 1: refused"},
			{"another SNI in the tunnel", connect("api.flock.test:443", "evil.flock.test"), false, "TLS through the tunnel"},
			// Agent 1's 0.0.0.0/0 means outside this host: never this host,
			// whether it asks by address or by a name that resolves here.
			{"an IP literal of this host", connect("127.0.0.1:8222", ""), false, "an address, not a name"},
			{"a name resolving to 127.0.0.1", connect("rebind.flock.test:443", "rebind.flock.test"), false, "(it resolves to 127.0.0.1)"},
			{"a name resolving to this host's own address", connect("host.flock.test:443", "host.flock.test"), false, "(it resolves to 192.0.2.1)"},
		} {
			r := p.do(t, tc.req)
			switch {
			case tc.allowed && (!r.OK || !strings.Contains(r.Detail, tc.want)):
				t.Errorf("%s: %s; want ok with %q", tc.name, r, tc.want)
			case !tc.allowed && r.OK:
				t.Errorf("ESCAPE: %s: %s", tc.name, r)
			case !tc.allowed && !strings.Contains(r.Err, tc.want):
				t.Errorf("%s: %s; want %q", tc.name, r, tc.want)
			case !tc.allowed && r.ElapsedMS > 1000:
				t.Errorf("%s: refused after %.0f ms", tc.name, r.ElapsedMS)
			case strings.HasPrefix(r.Err, "403") && r.ElapsedMS > 100:
				t.Errorf("%s: 403 after %.1f ms, want under 100", tc.name, r.ElapsedMS)
			default:
				t.Logf("%-36s %s", tc.name, r)
			}
		}

		// curl, as an agent runs it, finds the proxy by itself
		// (https_proxy): the allowed name answers, another gets the
		// proxy's 403 (direct, agent 1's 0.0.0.0/0 would have reached it).
		curlGet := func(url string) probeResult {
			return p.do(t, map[string]any{"op": "exec", "argv": []string{curl, "-sS", "--max-time", "5", "--cacert", upstreamCA, url}})
		}
		if r := curlGet("https://api.flock.test/"); !r.OK || !strings.Contains(r.Detail, "hello from api.flock.test") {
			t.Errorf("curl https://api.flock.test/ from agent 1: %s", r)
		}
		if r := curlGet("https://evil.flock.test/"); r.OK || !strings.Contains(r.Err, "403") {
			t.Errorf("curl https://evil.flock.test/ from agent 1: %s; want the proxy's 403", r)
		} else {
			t.Logf("curl to a name not allowed: %s", r)
		}
		// What the operator reads of these refusals (docs/troubleshooting.md).
		denied := transcript.New(t, "proxy-403")
		denied.Until(m, "flockctl events --agent 1 --since 10m | grep egress-denied", 10*time.Second, func(out string) error {
			if n := strings.Count(out, "egress-denied"); n != 7 {
				return fmt.Errorf("%d egress-denied events of agent 1, want 7 (six refused CONNECTs and curl's):\n%s", n, out)
			}
			return nil
		})
		denied.Want(m, "flockctl explain 1 | grep -E '^(egress|# names)'", "api.flock.test:443")

		// DNS from the agent fails: a query (UDP, or TCP) to the machine's
		// resolvers is refused at once, while the proxy resolved
		// api.flock.test for it above. A stand-in resolver on 127.0.0.53
		// answers root, so the agent's refusal is the wall, not a silent port.
		dnsStart := time.Now()
		mustRun(t, m, "systemd-run", "--unit=flock-test-resolver", "--collect", probeBin, "echo-serve", "127.0.0.53:53")
		defer run(t, m, "systemctl", "stop", "flock-test-resolver.service")
		m.Eventually(t, 10*time.Second, func() error {
			for _, op := range []string{"exchange-udp", "connect-tcp"} {
				out, _, _ := run(t, m, probeBin, "attempt", `{"op":"`+op+`","addr":"127.0.0.53:53"}`)
				if !strings.Contains(out, `"ok":true`) {
					return fmt.Errorf("control: the stand-in resolver does not answer root (%s): %s", op, out)
				}
			}
			return nil
		})
		resolvers := []string{"127.0.0.53"}
		conf, err := m.ReadFile("/etc/resolv.conf")
		if err != nil {
			t.Logf("no /etc/resolv.conf in the machine (%v): only 127.0.0.53", err)
		}
		for _, l := range strings.Split(string(conf), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" && !slices.Contains(resolvers, f[1]) {
				resolvers = append(resolvers, f[1])
			}
		}
		for _, ns := range resolvers {
			for _, op := range []string{"exchange-udp", "connect-tcp"} {
				r := p.do(t, map[string]any{"op": op, "addr": net.JoinHostPort(ns, "53")})
				switch {
				case r.OK:
					t.Errorf("ESCAPE: DNS from agent 1: %s to %s:53: %s", op, ns, r)
				case r.ElapsedMS > 1000:
					t.Errorf("DNS from agent 1: %s to %s:53 refused only after %.0f ms", op, ns, r.ElapsedMS)
				default:
					t.Logf("DNS %-12s to %-15s %s", op, ns, r)
				}
			}
		}
		t.Logf("DNS checks took %s", time.Since(dnsStart).Round(time.Millisecond))

		// Every decision is in the journal, with the agent's id, and on
		// the bus.
		m.Eventually(t, 10*time.Second, func() error {
			out, _, err := run(t, m, "journalctl", "-u", "flock-proxy.service", "-o", "json", "--no-pager", "AGENT_ID=1")
			if err != nil {
				return err
			}
			for _, reason := range []string{"allowed", "no-rule", "sni-mismatch", "ip-literal", "resolves-to-private"} {
				if !strings.Contains(out, `"REASON":"`+reason+`"`) {
					return fmt.Errorf("no journal entry with AGENT_ID=1 REASON=%s", reason)
				}
			}
			if !strings.Contains(out, `"NAME":"api.flock.test"`) || !strings.Contains(out, `"ADDR":"192.0.2.10"`) {
				return fmt.Errorf("the allowed tunnel's entry lacks NAME or ADDR")
			}
			return nil
		})

		m.Eventually(t, 10*time.Second, func() error {
			b, _ := m.ReadFile("/run/egress-events")
			for _, want := range []string{`Received on "flock.egress.1"`, `"decision":"allow","reason":"allowed","name":"api.flock.test","port":443,"addr":"192.0.2.10"`, `"reason":"sni-mismatch"`, `"reason":"resolves-to-private"`} {
				if !strings.Contains(string(b), want) {
					return fmt.Errorf("no %s on the bus in:\n%s", want, b)
				}
			}
			return nil
		})

		// A name added to the spec works at once, with no restart.
		provision(t, m, strings.Replace(busSpec, `"rebind.flock.test:443"]`, `"rebind.flock.test:443", "evil.flock.test:443"]`, 1))
		m.Eventually(t, 10*time.Second, func() error {
			if r := p.do(t, connect("evil.flock.test:443", "evil.flock.test")); !r.OK || !strings.Contains(r.Detail, "hello from evil.flock.test") {
				return fmt.Errorf("added name: %s", r)
			}
			return nil
		})
		if after := invocation(); after != before {
			t.Errorf("agent 1 restarted (InvocationID %s, was %s)", after, before)
		}

		// A stopped proxy: status names the agents it strands, and the
		// next provision starts it again.
		mustRun(t, m, "systemctl", "stop", "flock-proxy.service")
		table := statusOut(t, m)
		if want := "note: flock-proxy.service is inactive: agents 1, 2 cannot reach the names in their egress"; !strings.Contains(table, want) {
			t.Errorf("flockctl status with the proxy stopped does not say %q:\n%s", want, table)
		}
		for _, a := range status(t, m) {
			if want := map[int]string{1: "inactive", 2: "inactive"}[a.ID]; a.Proxy != want {
				t.Errorf("status: agent %d proxy %q, want %q", a.ID, a.Proxy, want)
			}
		}
		provision(t, m, busSpec)
		for _, a := range status(t, m) {
			if want := map[int]string{1: "active", 2: "active"}[a.ID]; a.Proxy != want {
				t.Errorf("status after provision: agent %d proxy %q, want %q", a.ID, a.Proxy, want)
			}
		}
		t.Logf("egress by name: %.1f s", time.Since(start).Seconds())
	})

	t.Run("each agent's credential is in its unit alone", func(t *testing.T) {
		// The path every agent reads holds its own seed in its unit, and
		// nothing on the host; the host's mount table has no entry for it.
		for _, id := range []string{"1", "2"} {
			seed, err := m.ReadFile("/var/lib/flock/creds/flock-" + id + ".nk")
			if err != nil {
				t.Fatal(err)
			}
			pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "flock-agent@"+id+".service", "-p", "MainPID", "--value"))
			inUnit := mustRun(t, m, "nsenter", "-m", "-t", pid, "cat", "/run/flock-agent/nats")
			if inUnit != string(seed) {
				t.Errorf("agent %s's unit has %q at /run/flock-agent/nats, want its own seed", id, inUnit)
			}
		}
		if b, err := m.ReadFile("/run/flock-agent/nats"); err != nil || len(b) != 0 {
			t.Errorf("the host's /run/flock-agent/nats: %q, %v; want an empty mount point", b, err)
		}
		if mounts := mustRun(t, m, "cat", "/proc/self/mountinfo"); strings.Contains(mounts, "flock-agent") || strings.Contains(mounts, "/creds/") {
			t.Errorf("the host's mount table has an agent's credential:\n%s", mounts)
		}
	})

	t.Run("the credential is not in any agent's environment", func(t *testing.T) {
		seed, err := m.ReadFile("/var/lib/flock/creds/flock-2.nk")
		if err != nil {
			t.Fatal(err)
		}
		key := strings.TrimSpace(string(seed))
		env := mustRun(t, m, "systemctl", "show", "flock-agent@2.service", "-p", "Environment")
		pid := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "flock-agent@2.service", "-p", "MainPID", "--value"))
		procEnv := mustRun(t, m, "cat", "/proc/"+pid+"/environ")
		if strings.Contains(env, key) || strings.Contains(procEnv, key) {
			t.Errorf("agent 2's seed is in its environment")
		}
		if !strings.Contains(procEnv, "NATS_NKEY=/run/flock-agent/nats") {
			t.Errorf("NATS_NKEY does not point at the credential: %q", procEnv)
		}
	})

	t.Run("violations are in flock's log, by agent name", func(t *testing.T) {
		m.Eventually(t, 10*time.Second, func() error {
			out, _, err := m.Run(t.Context(), "journalctl", "-u", "flock.service", "--no-pager", "-o", "cat")
			if err != nil {
				return err
			}
			for _, want := range []string{`Publish Violation`, `Subscription Violation`, `forged-lease violation`} {
				if !hasLineWith(out, "flock-1", want) {
					return fmt.Errorf("no line naming flock-1 with %q in journalctl -u flock.service", want)
				}
			}
			return nil
		})
		for _, s := range status(t, m) {
			if s.ID == 1 && s.Violations < 3 {
				t.Errorf("flockctl status counts %d violations for agent 1, want at least 3", s.Violations)
			}
		}
		// What the operator reads of them (docs/troubleshooting.md).
		v := transcript.New(t, "bus-violation")
		v.Want(m, "flockctl status", "violations: agent 1: ")
		v.Want(m, "flockctl events --agent 1 --since 10m | grep bus-violation", "forged-lease", "Publish Violation", "Subscription Violation")
		v.Want(m, "flockctl explain 1 | sed -n '/^## bus/,/^$/p'", "publish:   allow agent.1.>")
	})

	const flood = 10000
	var afterFlood map[string]uint64 // agent 1's violations by kind once its flood was counted
	t.Run("one agent's flood neither drowns the log nor hides another's", func(t *testing.T) {
		start := time.Now()
		was := map[int]agentStatus{}
		for _, s := range status(t, m) {
			was[s.ID] = s
		}
		cursor := journalCursor(t, m)
		for _, req := range []map[string]any{
			{"op": "nats-flood", "name": "agent.1.heartbeat", "data": "{not json", "count": flood},
			{"op": "nats-flood", "name": "agent.2.heartbeat", "count": flood},
		} {
			if r := p.do(t, req); !r.OK {
				t.Fatalf("agent 1's flood %v: %s", req, r)
			}
		}
		// Agent 2's one violation, with its own credential (from outside
		// its unit: the bus knows it by its key).
		out, _, _ := run(t, m, "env", "NATS_URL=nats://127.0.0.1:4222", "NATS_NKEY=/var/lib/flock/creds/flock-2.nk",
			"/usr/local/bin/probe", "attempt", `{"op":"nats-pub","name":"agent.1.heartbeat"}`)
		if !strings.Contains(out, "Permissions Violation for Publish") {
			t.Fatalf("agent 2's publish on agent.1.heartbeat: %s", out)
		}
		var a1, a2 agentStatus
		m.Eventually(t, 15*time.Second, func() error {
			for _, s := range status(t, m) {
				switch s.ID {
				case 1:
					a1 = s
				case 2:
					a2 = s
				}
			}
			grew := func(kind string) uint64 { return a1.ByKind[kind] - was[1].ByKind[kind] }
			if grew("malformed") != flood || grew("publish") != flood || grew("flood") < 1 || a2.Violations != was[2].Violations+1 || a2.ByKind["publish"] != was[2].ByKind["publish"]+1 {
				return fmt.Errorf("agent 1 %v (was %v), agent 2 %v (was %v): want %d more malformed and publish and a flood of agent 1's, one publish more of agent 2's",
					a1.ByKind, was[1].ByKind, a2.ByKind, was[2].ByKind, flood)
			}
			return nil
		})
		afterFlood = a1.ByKind
		var journal string
		m.Eventually(t, 10*time.Second, func() error {
			journal = mustRun(t, m, "journalctl", "-u", "flock.service", "--after-cursor", cursor, "--no-pager", "-o", "cat")
			if !hasLineWith(journal, `"$G/flock-2"`, `Publish Violation - Subject "agent.1.heartbeat"`) {
				return fmt.Errorf("agent 2's violation is not in the journal:\n%s", journal)
			}
			return nil
		})
		ofAgent1 := 0
		for _, l := range strings.Split(journal, "\n") {
			if strings.Contains(l, "flock-1") || strings.Contains(l, "agent 1") {
				ofAgent1++
			}
		}
		if ofAgent1 > 5 {
			t.Errorf("agent 1's %d messages wrote %d lines to the journal, want a handful:\n%s", 2*flood, ofAgent1, tailOf(journal, 2000))
		}
		// journald did not have to drop anything of flock.service's.
		if all := mustRun(t, m, "journalctl", "--after-cursor", cursor, "--no-pager", "-o", "cat"); hasLineWith(all, "Suppressed", "flock.service") {
			t.Errorf("journald suppressed flock.service's lines:\n%s", tailOf(all, 2000))
		}
		t.Logf("agent 1's %d messages: %d journal lines about agent 1, agent 1 now %v; agent 2's one violation logged and counted; took %s",
			2*flood, ofAgent1, a1.ByKind, time.Since(start).Round(time.Millisecond))
		t.Logf("flockctl status:\n%s", statusOut(t, m))
	})

	t.Run("agents ride out a stopped bus and heartbeat again when it is back", func(t *testing.T) {
		mustRun(t, m, "systemctl", "stop", "flock.service")
		// The agents notice, and keep running: a bus outage is not a crash.
		m.Eventually(t, 30*time.Second, func() error {
			for _, id := range []string{"2", "3", "4"} {
				b, err := m.ReadFile("/srv/flock/logs/" + id + ".log")
				if err != nil {
					return err
				}
				if !strings.Contains(string(b), "bus disconnected") {
					return fmt.Errorf("agent %s has not noticed the bus is gone", id)
				}
			}
			return nil
		})
		down := transcript.New(t, "bus-down")
		down.Want(m, "flockctl status", "note: the bus did not answer", "drift: (re)start bus flock.service")
		down.Want(m, "systemctl status flock.service | head -n 3", "inactive (dead)")
		waitActive(t, m, 1, 2, 3, 4)
		restarted := time.Now()
		mustRun(t, m, "systemctl", "start", "flock.service")
		back := waitBus(t, m, restarted, 2, 3, 4)
		t.Logf("all agents back on the bus %s after it started again", back.Sub(restarted).Round(time.Millisecond))
		if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "after the restart")); out != "AFTER THE RESTART" {
			t.Errorf("flockctl send after the restart: %q", out)
		}
	})

	// A bus that cannot start (another program holds its port) says why,
	// keeps trying, and is back by itself once the port is free.
	t.Run("a bus that cannot start says why and comes back by itself", func(t *testing.T) {
		mustRun(t, m, "systemctl", "stop", "flock.service")
		mustRun(t, m, "systemd-run", "--unit=flock-test-squatter", "--collect", probeBin, "echo-serve", "127.0.0.1:4222")
		defer run(t, m, "systemctl", "stop", "flock-test-squatter.service")
		m.Eventually(t, 10*time.Second, func() error {
			out, _, _ := run(t, m, probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:4222"}`)
			if !strings.Contains(out, `"ok":true`) {
				return fmt.Errorf("the squatter does not hold 127.0.0.1:4222 yet: %s", out)
			}
			return nil
		})
		mustRun(t, m, "systemctl", "start", "--no-block", "flock.service") // it fails: the port is taken
		stuck := transcript.New(t, "bus-not-starting", transcript.R(`restart counter is at \d+`, "restart counter is at <n>"))
		stuck.Until(m, "systemctl status flock.service | head -n 3", 30*time.Second, func(out string) error {
			if !strings.Contains(out, "auto-restart") {
				return fmt.Errorf("flock.service is not waiting to restart:\n%s", out)
			}
			return nil
		})
		stuck.Until(m, "journalctl -u flock.service -o cat | grep -m1 'address already in use'", 30*time.Second, func(out string) error {
			if !strings.Contains(out, "127.0.0.1:4222") {
				return fmt.Errorf("the bus's journal does not say its port is taken:\n%s", out)
			}
			return nil
		})
		stuck.Want(m, "ss -Hltnp 'sport = :4222'", `"probe"`)
		freed := time.Now()
		mustRun(t, m, "systemctl", "stop", "flock-test-squatter.service")
		back := waitBus(t, m, freed, 2, 3, 4)
		t.Logf("the bus started by itself and all agents were back %s after its port was free", back.Sub(freed).Round(time.Millisecond))
	})

	t.Run("violations are kept across the bus's restart", func(t *testing.T) {
		for _, s := range status(t, m) {
			if s.ID == 1 && (afterFlood == nil || s.ByKind["malformed"] < afterFlood["malformed"] || s.ByKind["publish"] < afterFlood["publish"]) {
				t.Errorf("agent 1's violations after the bus restarted: %v, before: %v", s.ByKind, afterFlood)
			}
		}
	})

	t.Run("a new agent reloads the bus: no restart, no one reconnects", func(t *testing.T) {
		busPID := func() string {
			return strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock.service"))
		}
		pid := busPID()
		before := strings.Count(mustRun(t, m, "cat", "/srv/flock/logs/2.log"), "bus disconnected")
		provision(t, m, busSpec+"  - id: 5\n")
		waitBus(t, m, time.Now(), 5)
		if after := busPID(); after != pid {
			t.Errorf("flock.service restarted (MainPID %s, was %s)", after, pid)
		}
		if after := strings.Count(mustRun(t, m, "cat", "/srv/flock/logs/2.log"), "bus disconnected"); after != before {
			t.Errorf("agent 2 was disconnected by the reload")
		}
	})

	t.Run("deprovision removes identities, credentials, the bus and the table", func(t *testing.T) {
		mustRun(t, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
		assertNothingLeft(t, m)
	})
}

// waitBus waits until the bus reports every agent in ids connected with a
// heartbeat newer than since, and returns when it saw that.
func waitBus(t testing.TB, m *harness.Machine, since time.Time, ids ...int) time.Time {
	t.Helper()
	m.Eventually(t, 60*time.Second, func() error {
		byID := map[int]agentStatus{}
		for _, s := range status(t, m) {
			byID[s.ID] = s
		}
		for _, id := range ids {
			s := byID[id]
			if s.Bus != "connected" || s.LastHeartbeat == nil || !s.LastHeartbeat.After(since) {
				return fmt.Errorf("agent %d: bus %q, last heartbeat %v (want after %s)", id, s.Bus, s.LastHeartbeat, since.Format(time.RFC3339Nano))
			}
		}
		return nil
	})
	return time.Now()
}

// journalCursor is the journal's end now: lines after it are new.
func journalCursor(t testing.TB, m *harness.Machine) string {
	t.Helper()
	out := mustRun(t, m, "journalctl", "--show-cursor", "-n", "0", "--no-pager")
	_, c, ok := strings.Cut(out, "-- cursor: ")
	if !ok {
		t.Fatalf("journalctl --show-cursor: %q", out)
	}
	return strings.TrimSpace(c)
}

func hasLineWith(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// After a reboot, flock.service (enabled) starts the bus and re-creates
// every agent's transient unit and the firewall from the last provisioned
// state: the flock is back without an operator.
func TestBootBringsTheFlockBack(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, busSpec)
	before := waitActive(t, m, 1, 2, 3, 4)
	waitBus(t, m, time.Time{}, 2, 3, 4)
	rules := withoutDynamicState(mustRun(t, m, "nft", "list", "table", "inet", "flock"))

	if err := m.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	after := waitActive(t, m, 1, 2, 3, 4)
	for i := range before {
		if before[i].UID != after[i].UID || before[i].User != after[i].User {
			t.Errorf("agent %d was %s (uid %d), now %s (uid %d)", before[i].ID, before[i].User, before[i].UID, after[i].User, after[i].UID)
		}
	}
	back := waitBus(t, m, booted, 2, 3, 4)
	t.Logf("agents active and heartbeating again %s after the machine came back", back.Sub(booted).Round(time.Millisecond))
	if got := withoutDynamicState(mustRun(t, m, "nft", "list", "table", "inet", "flock")); got != rules {
		t.Errorf("table inet flock after the reboot:\n%s\nbefore:\n%s", got, rules)
	}
	if out := strings.TrimSpace(mustRun(t, m, "flockctl", "send", "--to", "2", "still here")); out != "STILL HERE" {
		t.Errorf("flockctl send after the reboot: %q", out)
	}
	if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.HasPrefix(out, "nothing to do") {
		t.Errorf("provision after the reboot is not a no-op:\n%s", out)
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
