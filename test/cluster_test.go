package test

// Tier: root + nspawn + ansible. A flock on three hosts (issue 20): three
// booted systemd machines on a private network, each with sshd; a flock on
// a alone with tasks queued becomes one on all three by one run of
// ansible/site.yml from the network's controller, as an operator would,
// and its queued tasks are done on b and c; tasks sent on a are done on b
// and c; splits of the network, a bus killed in one and a host's power
// cut lose nothing (cluster_split_test.go); b's machine stopped
// while tasks flow loses none and doubles none, and catches up when it is
// back; a second run changes nothing; an agent reaches no other host; an
// agent moves to another host with a spec change and a run.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/transcript"
	"github.com/flockrun/flock/wire"
)

// clusterWorker upper-cases its task; a payload starting with "slow" takes
// half a second first, so that b is stopped with tasks in its hands while
// the latency's tasks ("fast ...") measure the flock, not a sleep.
const clusterWorker = `["/bin/sh", "-c", "read x; case $x in slow*) sleep 0.5;; esac; echo \"$x\" | tr a-z A-Z"]`

// clusterSpec: the orchestrator and the probe agent (4, a monitor, which
// takes no tasks) on a, a worker on b and one on c.
func clusterSpec(h *harness.Hosts) string { return clusterSpecWith(h, "c") }

// clusterSpecWith is clusterSpec with agent 3 on host3.
func clusterSpecWith(h *harness.Hosts, host3 string) string {
	return fmt.Sprintf(`hosts:
  - {name: a, address: %s}
  - {name: b, address: %s}
  - {name: c, address: %s}
defaults:
  host: a
  heartbeat: 1s
agents:
  - {id: 1, role: orchestrator}
  - {id: 2, host: b, command: %s}
  - {id: 3, host: %s, command: %s}
  - {id: 4, role: monitor, exec: ["/usr/local/bin/probe", "serve"]}
`, h.Addr("a"), h.Addr("b"), h.Addr("c"), clusterWorker, host3, clusterWorker)
}

// oneHostSpec is clusterSpec's flock on one host, before hosts were added.
const oneHostSpec = `defaults:
  heartbeat: 1s
agents:
  - {id: 1, role: orchestrator}
  - {id: 2, command: ` + clusterWorker + `}
  - {id: 3, command: ` + clusterWorker + `}
  - {id: 4, role: monitor, exec: ["/usr/local/bin/probe", "serve"]}
`

// singleSpec is the same worker alone on one host: the latency's baseline.
const singleSpec = `agents:
  - {id: 2, command: ` + clusterWorker + `}
`

// clusterAgents are the agents of each host.
var clusterAgents = map[string][]int{"a": {1, 4}, "b": {2}, "c": {3}}

func TestCluster(t *testing.T) {
	// Tier: root + nspawn + ansible (HostsTier, ClusterTier).
	if testing.Short() {
		t.Skip("boots four systemd machines: not with -short")
	}
	playbook := harness.AnsibleTier.Tool(t, "ansible-playbook")
	harness.ClusterTier.Require(t)
	bin := harness.BinDir(t)
	// flockctl and flock-agent come with the role, as on a real host;
	// the probe is the test's.
	h := harness.BootHosts(t, []string{"a", "b", "c"}, harness.Options{NoBinaries: true,
		Binaries: map[string]string{"probe": bin + "/probe"}})
	a, b, c := h.Machine("a"), h.Machine("b"), h.Machine("c")
	p := harness.NewHostsPlayer(t, h, playbook, "ansible/site.yml",
		map[string]any{"flock_bin_dir": bin, "flock_spec": clusterSpec(h)}, nil)

	// --check on hosts without flock says each would change and changes
	// nothing: no CA made, no file copied.
	check := p.Play(t, nil, "--check", "--diff")
	check.MustSucceed(t)
	for _, name := range h.Names() {
		if rc := check.Recaps[name]; rc.Changed == 0 {
			t.Errorf("--check on new host %s: changed=0, want changes", name)
		}
		for _, path := range []string{"/etc/flock", "/var/lib/flock", "/usr/local/bin/flockctl"} {
			if _, _, err := run(t, h.Machine(name), "test", "!", "-e", path); err != nil {
				t.Errorf("--check made %s on host %s", path, name)
			}
		}
	}

	// A flock on a alone first, as it was before the operator added
	// hosts: two results stored, its workers stopped and 20 tasks
	// queued, which must all be done once each on b and c after the
	// three-host run.
	alone := p.Play(t, map[string]any{"flock_spec": oneHostSpec}, "--limit", "a")
	alone.MustSucceed(t)
	clusterWaitUnits(t, a, time.Minute, 1, 2, 3, 4)
	done := []string{"alone-1", "alone-2"}
	for _, id := range done {
		mustRun(t, a, "flockctl", "send", "--to", "2", "--id", id, "--timeout", "1m", "fast "+id)
	}
	mustRun(t, a, "systemctl", "stop", unitName(2), unitName(3))
	queued := taskIDs("queued", 20)
	sendTasks(t, a, "worker", queued)

	// One run provisions the three hosts. The cluster's state is polled
	// meanwhile, so its formation is timed from the buses' starts.
	t0 := time.Now()
	polled := make(chan time.Duration, 1)
	stop := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if _, err := clusterState(t, h); err == nil {
				polled <- monotonic()
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	r := p.Play(t, nil)
	played := time.Since(t0)
	if r.Err != nil {
		close(stop)
	}
	r.MustSucceed(t)
	for _, name := range h.Names() {
		if rc := r.Recaps[name]; rc.Changed == 0 {
			t.Errorf("first run: host %s changed nothing: %+v", name, rc)
		}
		if got := r.HostTasks[name]["Install this host's cluster files"]; got != "changed" {
			t.Errorf("host %s: task Install this host's cluster files: %q, want changed", name, got)
		}
		if got := r.HostTasks[name]["Provision the flock"]; got != "changed" {
			t.Errorf("host %s: task Provision the flock: %q, want changed", name, got)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var formed time.Duration
	select {
	case formed = <-polled:
	case <-time.After(3 * time.Minute):
		close(stop)
		waitClusterFormed(t, h, time.Second) // fails with what is missing
	}
	var first, last time.Duration
	for i, name := range h.Names() {
		us, err := strconv.ParseInt(strings.TrimSpace(mustRun(t, h.Machine(name), "systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "--value", "flock.service")), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		started := time.Duration(us) * time.Microsecond
		if i == 0 || started < first {
			first = started
		}
		last = max(last, started)
	}
	t.Logf("CLUSTER FORMATION: the JetStream cluster (3 servers, every stream R3 with every replica current, polled every 200 ms) "+
		"was formed %v after the last host's bus started, %v after the first's; the whole play took %v",
		(formed - last).Round(time.Millisecond), (formed - first).Round(time.Millisecond), played.Round(time.Millisecond))
	for name, ids := range clusterAgents {
		clusterWaitUnits(t, h.Machine(name), time.Minute, ids...)
	}

	t.Run("the tasks queued on a alone are done on b and c, each once", func(t *testing.T) {
		t0 := time.Now()
		got := waitAllDone(t, a, append(queued, done...), 3*time.Minute)
		by := map[int]int{}
		for _, id := range queued {
			by[got[id].Agent]++
		}
		if by[2]+by[3] != len(queued) {
			t.Errorf("the queued tasks were done by %v, want agents 2 and 3", by)
		}
		t.Logf("FIGURE one host to three: %d tasks queued on a alone, all done once on b and c (by agent: %v) %v after the play; its %d results kept",
			len(queued), by, time.Since(t0).Round(time.Millisecond), len(done))
	})

	t.Run("each host has its own cluster files and only the first the CA's key", func(t *testing.T) {
		for _, name := range h.Names() {
			m := h.Machine(name)
			out := mustRun(t, m, "stat", "-c", "%n %a %U", "/etc/flock/cluster", "/etc/flock/cluster/ca.crt",
				"/etc/flock/cluster/host.crt", "/etc/flock/cluster/host.key", "/etc/flock/cluster/secret")
			want := "/etc/flock/cluster 700 root\n/etc/flock/cluster/ca.crt 644 root\n/etc/flock/cluster/host.crt 644 root\n" +
				"/etc/flock/cluster/host.key 600 root\n/etc/flock/cluster/secret 600 root\n"
			if out != want {
				t.Errorf("host %s: %s, want %s", name, out, want)
			}
			// The host's certificate names it (a SAN with its address).
			cert := mustRun(t, m, "openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", "/etc/flock/cluster/host.crt")
			if !strings.Contains(cert, h.Addr(name).String()) {
				t.Errorf("host %s: its certificate's names: %s, want its address %s", name, cert, h.Addr(name))
			}
			mustRun(t, m, "openssl", "verify", "-CAfile", "/etc/flock/cluster/ca.crt", "/etc/flock/cluster/host.crt")
			_, _, err := run(t, m, "test", "-e", "/var/lib/flock/cluster-authority/ca.key")
			if hasKey := err == nil; hasKey != (name == "a") {
				t.Errorf("host %s has the CA's key: %v", name, hasKey)
			}
		}
		if strings.Contains(r.Out, "PRIVATE KEY") {
			t.Errorf("the play printed a private key")
		}
	})

	t.Run("a host runs its own agents only", func(t *testing.T) {
		for name, m := range map[string]*harness.Machine{"a": a, "b": b, "c": c} {
			for id := 1; id <= 4; id++ {
				state := strings.TrimSpace(clusterRun(t, m, "systemctl", "is-active", unitName(id)))
				if mine := slices.Contains(clusterAgents[name], id); mine != (state == "active") {
					t.Errorf("host %s: %s is %s", name, unitName(id), state)
				}
			}
			// Every agent's user, with the same uid everywhere.
			if out := mustRun(t, m, "sh", "-c", "getent passwd flock-1 flock-2 flock-3 flock-4 | cut -d: -f1,3"); out != mustRun(t, a, "sh", "-c", "getent passwd flock-1 flock-2 flock-3 flock-4 | cut -d: -f1,3") {
				t.Errorf("host %s's agent users differ from a's: %s", name, out)
			}
		}
	})

	t.Run("tasks sent on a are done on b and c", func(t *testing.T) {
		for _, to := range []int{2, 3} {
			var res wire.Result
			out := mustRun(t, a, "flockctl", "send", "--to", strconv.Itoa(to), "--output", "json", "hello from a")
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("flockctl send --output json: %v\n%s", err, out)
			}
			if res.Agent != to || !res.OK || res.Output != "HELLO FROM A\n" {
				t.Errorf("task for agent %d: %+v", to, res)
			}
		}
	})

	t.Run("status, tasks and explain on any host show the whole flock", func(t *testing.T) {
		for _, name := range []string{"a", "c"} {
			m := h.Machine(name)
			rows := clusterStatus(t, m)
			for id := 1; id <= 4; id++ {
				r, ok := rows[id]
				want := clusterHostOf(id)
				if !ok || r.Host != want || r.State != "active" {
					t.Errorf("status on %s: agent %d %+v, want host %s, active", name, id, r, want)
				}
			}
			// The table has the host column.
			if out := statusOut(t, m); !strings.Contains(out, "HOST") {
				t.Errorf("status on %s has no HOST column:\n%s", name, out)
			}
			var tasks []struct {
				Agent int    `json:"agent"`
				Host  string `json:"host"`
			}
			out := mustRun(t, m, "flockctl", "tasks", "--output", "json")
			if err := json.Unmarshal([]byte(out), &tasks); err != nil {
				t.Fatalf("tasks --output json on %s: %v\n%s", name, err, out)
			}
			seen := map[string]bool{}
			for _, tk := range tasks {
				if tk.Agent != 0 && tk.Host != clusterHostOf(tk.Agent) {
					t.Errorf("tasks on %s: a task of agent %d on host %q, want %s", name, tk.Agent, tk.Host, clusterHostOf(tk.Agent))
				}
				seen[tk.Host] = true
			}
			if !seen["b"] || !seen["c"] {
				t.Errorf("tasks on %s: hosts %v, want the results of b and c", name, seen)
			}
			if out := mustRun(t, m, "flockctl", "explain", "-f", "/etc/flock/flock.yaml", "2"); !strings.Contains(out, "host: b ("+h.Addr("b").String()+")") {
				t.Errorf("explain 2 on %s does not say it runs on b:\n%s", name, out)
			}
		}
	})

	t.Run("latency across hosts against one host", func(t *testing.T) {
		single := harness.BootWith(t, harness.Options{NoBinaries: true, Binaries: map[string]string{
			"flockctl": bin + "/flockctl", "flock-agent": bin + "/flock-agent", "probe": bin + "/probe"}})
		provision(t, single, singleSpec)
		clusterWaitUnits(t, single, time.Minute, 2)
		const n = 50
		local := sendLatencies(t, single, "2", "single", n)
		cross := append(sendLatencies(t, a, "2", "cross-b", n), sendLatencies(t, a, "3", "cross-c", n)...)
		t.Logf("LATENCY (flockctl send, sent to result printed, %d tasks each): one host p50 %v p99 %v max %v; a to b and c p50 %v p99 %v max %v; across hosts / one host: p50 %.2fx, p99 %.2fx",
			n, pct(local, 50), pct(local, 99), pct(local, 100), pct(cross, 50), pct(cross, 99), pct(cross, 100),
			float64(pct(cross, 50))/float64(pct(local, 50)), float64(pct(cross, 99))/float64(pct(local, 99)))
	})

	t.Run("b stopped while 100 tasks flow loses none and doubles none", func(t *testing.T) {
		ids := taskIDs("flow", 100)
		sendTasks(t, a, "worker", ids[:30])
		// b goes down in the middle of the flow: once its worker has done
		// a few of these tasks, while it holds the next.
		a.Eventually(t, time.Minute, func() error {
			if n := doneBy(t, a, 2, ids); n < 3 {
				return fmt.Errorf("agent 2 on b has done %d of the tasks", n)
			}
			return nil
		})
		t1 := time.Now()
		if err := b.PowerOff(); err != nil {
			t.Fatal(err)
		}
		t.Logf("b powered off in %v with 30 tasks sent, %d done by agent 2 on b", time.Since(t1).Round(time.Millisecond), doneBy(t, a, 2, ids))
		sendTasks(t, a, "worker", ids[30:])
		// status on a still shows b's agent, as unknown, and says why.
		if r := clusterStatus(t, a)[2]; r.Host != "b" || r.State != "unknown" || !strings.Contains(r.StateNote, "host b did not answer") {
			t.Errorf("status on a with b down: agent 2 %+v, want unknown, host b did not answer", r)
		}
		// a's /metrics says so too (FlockClusterHostDown's series).
		waitHostsUp(t, a, map[string]int{"b": 0, "c": 1})
		// What the operator reads on a (docs/troubleshooting.md).
		down := transcript.New(t, "host-down")
		down.Want(a, "flockctl status", "unknown (host b did not answer)")
		down.Want(a, "curl -s http://127.0.0.1:8223/metrics | grep '^flock_cluster_host_up'", `flock_cluster_host_up{host="b"} 0`)
		done := waitAllDone(t, a, ids, 5*time.Minute)
		by, lost := map[int]int{}, 0
		for _, id := range ids {
			if e, ok := done[id]; ok {
				by[e.Agent]++
			} else {
				lost++
			}
		}
		t.Logf("TASKS LOST: %d of %d (each has exactly one result); by agent: %v; all done %v after b went down",
			lost, len(ids), by, time.Since(t1).Round(time.Millisecond))
	})

	t.Run("b started again rejoins and catches up", func(t *testing.T) {
		t1 := time.Now()
		if err := b.PowerOn(t.Context()); err != nil {
			t.Fatal(err)
		}
		booted := time.Since(t1)
		clusterWaitUnits(t, b, 2*time.Minute, 2)
		caught := waitClusterFormed(t, h, 3*time.Minute)
		t.Logf("CATCH-UP: b booted in %v; its bus had every stream as the others have it, every replica current, %v after power on",
			booted.Round(time.Millisecond), caught.Sub(t1).Round(time.Millisecond))
		waitHostsUp(t, a, map[string]int{"b": 1, "c": 1})
		waitHostsUp(t, b, map[string]int{"a": 1, "c": 1})
		// b's own view: every task once, done.
		waitAllDone(t, b, taskIDs("flow", 100), time.Minute)
		// And its worker takes tasks again.
		for _, id := range taskIDs("back", 5) {
			out := mustRun(t, a, "flockctl", "send", "--to", "2", "--id", id, "--output", "json", "fast "+id)
			var res wire.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Agent != 2 || !res.OK {
				t.Errorf("task %s for agent 2 after b's return: %v %s", id, err, out)
			}
		}
	})

	t.Run("splits, a bus killed and a power cut lose nothing", func(t *testing.T) { splits(t, h) })

	t.Run("a second run changes nothing", func(t *testing.T) {
		// --diff: what provision did, if anything, is in the play.
		r := p.Play(t, nil, "--diff")
		r.MustSucceed(t)
		for _, name := range h.Names() {
			if rc := r.Recaps[name]; rc.Changed != 0 {
				t.Errorf("second run: host %s changed=%d: %v", name, rc.Changed, changedTasks(r.HostTasks[name]))
			}
		}
		if t.Failed() {
			t.Logf("%s", r.Section("Show flockctl's plan"))
		}
	})

	t.Run("an agent reaches neither the other hosts nor the cluster port", func(t *testing.T) {
		pr := startedProbe(t, a, 4)
		var targets []string
		for _, name := range h.Names() {
			targets = append(targets, netip.AddrPortFrom(h.Addr(name), 6222).String())
			if name != "a" {
				targets = append(targets, netip.AddrPortFrom(h.Addr(name), 22).String())
			}
		}
		targets = append(targets, netip.AddrPortFrom(harness.NetController, 22).String())
		for _, addr := range targets {
			req := map[string]any{"op": "connect-tcp", "addr": addr}
			r := pr.do(t, req)
			t.Logf("agent 4 on a: connect %s: %s", addr, r)
			if r.OK {
				t.Errorf("HOLE: agent 4 on a connected to %s", addr)
			} else if r.ElapsedMS >= 1000 {
				t.Errorf("connect %s: refused after %.0f ms; want < 1000 ms (a reject, not a drop)", addr, r.ElapsedMS)
			}
		}
		// The control: root on a reaches b's and c's cluster port, which
		// accept a's address; the refusal above is the agent's wall.
		for _, name := range []string{"b", "c"} {
			addr := netip.AddrPortFrom(h.Addr(name), 6222).String()
			if c := asRootInside(t, a, pr.pid, map[string]any{"op": "connect-tcp", "addr": addr}); !c.OK {
				t.Errorf("control: root on a cannot reach %s either (%s), so the refusal proves nothing", addr, c)
			}
		}
		// And the cluster port takes no one but the hosts: the controller
		// (10.77.0.1, not in the spec) is not let in.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := h.Net.Command(ctx, "curl", "-sS", "-m", "3", "telnet://"+netip.AddrPortFrom(h.Addr("b"), 6222).String()).CombinedOutput()
		if err == nil {
			t.Errorf("the controller, not a host of the flock, reached b's cluster port: %s", out)
		} else {
			t.Logf("controller to b's cluster port: %v: %s", err, strings.TrimSpace(string(out)))
		}
	})

	t.Run("moving an agent is a spec change and a run", func(t *testing.T) { moveAgent(t, h, p) })
}

// clusterHostOf is the host clusterSpec puts agent id on.
func clusterHostOf(id int) string {
	for host, ids := range clusterAgents {
		if slices.Contains(ids, id) {
			return host
		}
	}
	return ""
}

// clusterStatusRow is what the cluster test reads of status's JSON.
type clusterStatusRow struct {
	ID        int    `json:"id"`
	Host      string `json:"host"`
	State     string `json:"state"`
	StateNote string `json:"state_note"`
}

// clusterStatus is `flockctl status --output json` on m, by agent id.
func clusterStatus(t *testing.T, m *harness.Machine) map[int]clusterStatusRow {
	t.Helper()
	out := statusOut(t, m, "--output", "json")
	var list []clusterStatusRow
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("status --output json: %v\n%s", err, out)
	}
	rows := map[int]clusterStatusRow{}
	for _, r := range list {
		rows[r.ID] = r
	}
	return rows
}

// waitHostsUp waits until m's /metrics says of each other host whether
// its bus has a route to that host's (flock_cluster_host_up).
func waitHostsUp(t *testing.T, m *harness.Machine, want map[string]int) {
	t.Helper()
	m.Eventually(t, time.Minute, func() error {
		out, errOut, err := run(t, m, "curl", "-fsS", metricsURL)
		if err != nil {
			return fmt.Errorf("curl %s: %v %s", metricsURL, err, errOut)
		}
		for host, up := range want {
			if line := fmt.Sprintf("flock_cluster_host_up{host=%q} %d\n", host, up); !strings.Contains(out, line) {
				return fmt.Errorf("no %q in %s's /metrics", strings.TrimSpace(line), m.Name())
			}
		}
		return nil
	})
}
