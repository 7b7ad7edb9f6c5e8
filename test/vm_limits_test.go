package test

// Tier: root + VM (qemu). The limits the nspawn tier can only assert as
// properties (docs/design.md, "Test tiers": the booted machine), enforced by a real kernel:
// three hostile agents, each against one limit, next to a well-behaved
// neighbour whose heartbeats are recorded on the bus throughout.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/test/harness"
)

// The hogs are the agents' own programs (exec), written into the VM where
// every agent can read them.
const hogDir = "/usr/local/lib/flock-vm-test"

// memHog touches memory a MiB at a time until the kernel stops it.
const memHog = `chunks = []
while True:
    chunks.append(b"\x01" * (1 << 20))  # filled, so every page is touched
`

// forkBomb forks without end: every child forks too. A refused fork is
// counted by its errno, and the first process writes the counts to its
// home.
const forkBomb = `import errno, json, os, time
out = os.path.join(os.environ["HOME"], "forkbomb.json")
first = os.getpid()
refused = {}
while True:
    try:
        os.fork()
        continue
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        refused[name] = refused.get(name, 0) + 1
    if os.getpid() == first:
        with open(out + ".tmp", "w") as f:
            json.dump(refused, f)
        os.replace(out + ".tmp", out)
    time.sleep(0.1)
`

// Agent 4 is the neighbour: flock-agent's own program, heartbeating every
// second. It is provisioned alone first, so its heartbeats are recorded
// before, while and after the hogs arrive.
const (
	neighbourSpec = `agents:
  - id: 4
    heartbeat: 1s
`
	limitsSpec = `agents:
  - id: 1
    exec: ["/usr/bin/python3", "` + hogDir + `/memhog.py"]
    limits: {memory: 64M}
  - id: 2
    exec: ["/usr/bin/python3", "` + hogDir + `/forkbomb.py"]
    limits: {tasks: 20}
  - id: 3
    exec: ["/bin/sh", "-c", "while :; do :; done & while :; do :; done"]
    limits: {cpu: 20%}
  - id: 4
    heartbeat: 1s
`
	memHogID, forkBombID, cpuHogID, neighbourID = 1, 2, 3, 4
	memLimit                                    = 64 << 20
	tasksLimit                                  = 20
	cpuQuotaPct                                 = 20.0
	// watchFor is how long the cgroups are sampled: at least 10 s of
	// CPU measurement, and time for the memory hog to be killed and
	// restarted (RestartUSec is 5 s on systemd 252) more than once.
	watchFor = 25 * time.Second
)

// recorderUnit records the neighbour's heartbeats as the operator.
const (
	recorderUnit = "flock-test-heartbeats.service"
	recorderOut  = "/root/heartbeats.json"
)

// agentCgroup is where systemd puts agent id's unit (slice
// system-flock\x2dagent.slice, docs/design.md, "Units"); checked against
// systemd below.
func agentCgroup(id int) string {
	return `/sys/fs/cgroup/system.slice/system-flock\x2dagent.slice/` + unitName(id)
}

// TestVMEnforcesLimits proves MemoryMax, TasksMax and CPUQuota are
// enforced on agents, and that a neighbour keeps heartbeating through it;
// /metrics and flockctl events show what the kernel did (OOM kills, a
// firewall refusal in the kernel's log), flock.service killed at its
// own MemoryMax keeps its tasks, and flock-proxy, flooded with one
// agent's whole share of 32 MiB bodies at once, stays within 256 MiB
// and is not restarted.
// Tier: root + VM (qemu).
func TestVMEnforcesLimits(t *testing.T) {
	t.Parallel() // as many VMs at once as -parallel allows (Makefile: VM_PARALLEL)
	v := harness.BootVM(t)
	mustRun(t, v, "mkdir", "-p", hogDir)
	for name, src := range map[string]string{"memhog.py": memHog, "forkbomb.py": forkBomb} {
		if err := v.WriteFile(hogDir+"/"+name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	vmProvision(t, v, neighbourSpec)
	vmWaitActive(t, v, time.Minute, neighbourID)
	neighbour := vmProps(t, v, unitName(neighbourID), "MainPID", "ControlGroup")
	if got, want := "/sys/fs/cgroup"+neighbour["ControlGroup"], agentCgroup(neighbourID); got != want {
		t.Fatalf("agent %d's cgroup is %s, want %s", neighbourID, got, want)
	}
	mustRun(t, v, "systemd-run", "--unit", recorderUnit, "--property", "Type=exec",
		probeBin, "heartbeats", "-agent", strconv.Itoa(neighbourID), "-out", recorderOut)
	recordStart := time.Now()

	vmProvision(t, v, limitsSpec)
	var watch []cgroupWatch
	out := mustRun(t, v, probeBin, "cgroup", "-for", watchFor.String(), "-every", "20ms",
		agentCgroup(memHogID), agentCgroup(forkBombID), agentCgroup(cpuHogID))
	if err := json.Unmarshal([]byte(out), &watch); err != nil || len(watch) != 3 {
		t.Fatalf("probe cgroup: %v\n%s", err, out)
	}
	mem, bomb, cpu := watch[0], watch[1], watch[2]

	t.Run("memory hog is OOM-killed at MemoryMax and restarted", func(t *testing.T) {
		checkMemoryHog(t, v, mem)
	})
	t.Run("fork bomb never exceeds TasksMax", func(t *testing.T) {
		checkForkBomb(t, v, bomb)
	})
	t.Run("CPU hog stays within its quota", func(t *testing.T) {
		checkCPUHog(t, v, cpu)
	})
	t.Run("neighbour keeps heartbeating", func(t *testing.T) {
		checkNeighbour(t, v, neighbour["MainPID"], recordStart)
	})
	t.Run("/metrics has the cgroup figures nspawn lacks, and the OOM kills", func(t *testing.T) {
		checkMetrics(t, v)
	})
	t.Run("flock.service at its MemoryMax is killed, starts again and keeps its stored tasks", func(t *testing.T) {
		checkBusAtItsBound(t, v)
	})
	t.Run("flockctl events: each OOM kill one event, a refused connect the kernel's line", func(t *testing.T) {
		checkEvents(t, v)
	})
	// Last: it deprovisions the hogs (vm_gateway_flood_test.go).
	t.Run("flock-proxy holds an agent's whole share of 32 MiB bodies at once within 256 MiB, without a restart", func(t *testing.T) {
		checkGatewayFlood(t, v)
	})
}

// checkEvents: each OOM kill of the memory hog is one oom-killed event of
// its agent, as many as the kernel's OOM reports for its cgroup, with no
// "failed" beside them and a restart between; no other agent has one.
// And a VM's journal has the kernel's log (an nspawn machine's has not):
// the neighbour's uid refused once is one firewall-refused event, from
// the kernel's line (the counters add nothing).
func checkEvents(t *testing.T, v *harness.VM) {
	var evs []events.Event
	// Killed, restarted and killed again: each kill is its own event.
	v.Eventually(t, 4*time.Minute, func() error {
		evs = eventsOf(t, v, "--since", "1h", "--agent", strconv.Itoa(memHogID))
		if count(evs, events.OOMKilled, memHogID, "") < 2 || count(evs, events.Restarted, memHogID, "") < 1 {
			return fmt.Errorf("agent %d not OOM-killed, restarted and killed again yet:\n%s", memHogID, texts(evs))
		}
		return nil
	})
	// Stopped, so the counts hold still while they are compared.
	mustRun(t, v, "systemctl", "stop", unitName(memHogID))
	uid := strconv.Itoa(2000000000 + neighbourID)
	out, _, _ := run(t, v, "setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups",
		probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:8222"}`)
	if !strings.Contains(out, "connection refused") {
		t.Fatalf("agent %d's connect to 127.0.0.1:8222: %s", neighbourID, out)
	}
	v.Eventually(t, 30*time.Second, func() error {
		evs = eventsOf(t, v, "--since", "1h")
		if n := count(evs, events.FirewallRefused, 0, ""); n != 1 {
			return fmt.Errorf("%d firewall-refused events, want 1:\n%s", n, texts(evs))
		}
		return nil
	})
	if n := count(evs, events.FirewallRefused, neighbourID, "TCP to 127.0.0.1:8222 refused by table inet flock (kernel log"); n != 1 {
		t.Errorf("agent %d's refusal is not the kernel's line:\n%s", neighbourID, texts(evs))
	}
	kills := 0
	for _, l := range strings.Split(mustRun(t, v, "journalctl", "-k", "--no-pager", "-o", "cat"), "\n") {
		if m := oomKillRe.FindStringSubmatch(l); m != nil && strings.HasSuffix(m[1], "/"+unitName(memHogID)) {
			kills++
		}
	}
	ooms := count(evs, events.OOMKilled, memHogID, "killed by the kernel's OOM killer")
	if ooms != kills || kills == 0 {
		t.Errorf("%d oom-killed events of agent %d, the kernel reports %d OOM kills in its cgroup; want as many, at least one:\n%s", ooms, memHogID, kills, texts(evs))
	}
	if n := count(evs, events.Failed, memHogID, ""); n != 0 {
		t.Errorf("%d failed events of agent %d beside its OOM kills, want none:\n%s", n, memHogID, texts(evs))
	}
	for _, id := range []int{forkBombID, cpuHogID, neighbourID} {
		if n := count(evs, events.OOMKilled, id, ""); n != 0 {
			t.Errorf("agent %d has %d oom-killed events", id, n)
		}
	}
	if r := count(evs, events.Restarted, memHogID, ""); r < ooms-1 || r > ooms {
		t.Errorf("%d restarts of agent %d after %d OOM kills", r, memHogID, ooms)
	}
	t.Logf("FIGURE oom: %d OOM kills of agent %d (kernel) = %d oom-killed events\nflockctl events --since 1h:\n%s", kills, memHogID, ooms,
		mustRun(t, v, "flockctl", "events", "--since", "1h"))
	t.Logf("flockctl events --since 1h --agent %d --output json:\n%s", memHogID, mustRun(t, v, "flockctl", "events", "--since", "1h", "--agent", strconv.Itoa(memHogID), "--output", "json"))
	if dir := capture; dir != "" {
		captureJournal(t, v, dir+"/vm-oom.jsonl")
	}
}

// checkBusAtItsBound brings flock.service to its memory bound the
// kernel's way (MemoryMax below what it uses: the kernel reclaims, then
// OOM-kills in the cgroup) with tasks stored that no worker takes, then
// gives the bound back: the bus was killed, systemd started it again by
// itself, and every task it had confirmed is still pending.
func checkBusAtItsBound(t *testing.T, v *harness.VM) {
	const unit, tasks = "flock.service", 10
	for i := 1; i <= tasks; i++ {
		// Agent 1 runs the memory hog, which takes no tasks.
		mustRun(t, v, "flockctl", "send", "--no-wait", "--to", strconv.Itoa(memHogID), "--id", fmt.Sprintf("bound-%d", i), "kept")
	}
	before := vmProps(t, v, unit, "NRestarts", "MemoryMax")
	since := strings.TrimSpace(mustRun(t, v, "date", "+%Y-%m-%d %H:%M:%S"))
	mustRun(t, v, "systemctl", "set-property", "--runtime", unit, "MemoryMax=4M")
	v.Eventually(t, time.Minute, func() error {
		if log := mustRun(t, v, "journalctl", "--no-pager", "-o", "cat", "-u", unit, "--since", since); !strings.Contains(log, "Failed with result 'oom-kill'") {
			return fmt.Errorf("%s not yet killed at MemoryMax=4M", unit)
		}
		return nil
	})
	mustRun(t, v, "systemctl", "set-property", "--runtime", unit, "MemoryMax="+before["MemoryMax"])
	// Back by itself, and the neighbour on it again (the memory hog keeps
	// restarting: it is not waited for).
	v.Eventually(t, 2*time.Minute, func() error {
		if out, _, err := run(t, v, "systemctl", "is-active", unit); err != nil {
			return fmt.Errorf("%s is %s", unit, strings.TrimSpace(out))
		}
		st, err := vmStatus(t, v)
		if err != nil {
			return err
		}
		for _, a := range st {
			if a.ID == neighbourID && (a.State != "active" || a.Bus != "connected") {
				return fmt.Errorf("agent %d is %s, bus %q", a.ID, a.State, a.Bus)
			}
		}
		return nil
	})
	after := vmProps(t, v, unit, "NRestarts")
	if b, _ := strconv.Atoi(before["NRestarts"]); func() bool { a, _ := strconv.Atoi(after["NRestarts"]); return a <= b }() {
		t.Errorf("%s NRestarts %s before, %s after: systemd did not start it again", unit, before["NRestarts"], after["NRestarts"])
	}
	pending := 0
	for _, e := range vmTasks(t, v) {
		if strings.HasPrefix(e.ID, "bound-") && e.State == operator.Pending {
			pending++
		}
	}
	if pending != tasks {
		t.Errorf("%d of the %d tasks the bus confirmed are pending after it was killed at its bound", pending, tasks)
	}
	t.Logf("FIGURE bus at its bound: OOM-killed, NRestarts %s -> %s, %d of %d stored tasks pending after", before["NRestarts"], after["NRestarts"], pending, tasks)
}

// checkMetrics scrapes /metrics in the VM (full cgroup v2, unlike an
// nspawn machine) with Python's standard library, which the image has:
// memory, its peak and CPU for every running agent, the CPU hog's seconds,
// the memory hog's restarts and its last exit by SIGKILL.
func checkMetrics(t *testing.T, v *harness.VM) {
	var expo string
	value := func(series string) (float64, bool) { return seriesValue(expo, series) }
	// systemd forgets the last exit when the unit starts again, so the
	// series is there while the hog waits to restart (RestartUSec 5 s, most
	// of each cycle): scrape until it is.
	harness.Eventually(t, time.Minute, func() error {
		expo = mustRun(t, v, "python3", "-c", "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8223/metrics').read().decode())")
		if st, ok := value(fmt.Sprintf(`flock_agent_last_exit_status{agent="%d",code="killed"}`, memHogID)); !ok || st != 9 {
			return fmt.Errorf("the memory hog's last exit by /metrics: %v %v, want killed by signal 9", st, ok)
		}
		return nil
	})
	// The running agents have a cgroup; the memory hog, waiting to
	// restart, has none (only systemd's CPU total stays).
	for _, id := range []int{forkBombID, cpuHogID, neighbourID} {
		for _, fam := range []string{"flock_agent_memory_bytes", "flock_agent_memory_peak_bytes", "flock_agent_cpu_seconds_total"} {
			if _, ok := value(fmt.Sprintf(`%s{agent="%d"}`, fam, id)); !ok {
				t.Errorf("no %s for agent %d in /metrics", fam, id)
			}
		}
	}
	if _, ok := value(fmt.Sprintf(`flock_agent_memory_bytes{agent="%d"}`, memHogID)); ok {
		t.Errorf("the memory hog, between a kill and its restart, has a memory figure; it has no cgroup")
	}
	if cpu, _ := value(fmt.Sprintf(`flock_agent_cpu_seconds_total{agent="%d"}`, cpuHogID)); cpu < 1 {
		t.Errorf("the CPU hog used %.2f s of CPU by /metrics, want at least 1 s after %s at %.0f%%", cpu, watchFor, cpuQuotaPct)
	}
	cur, _ := value(fmt.Sprintf(`flock_agent_memory_bytes{agent="%d"}`, neighbourID))
	if peak, _ := value(fmt.Sprintf(`flock_agent_memory_peak_bytes{agent="%d"}`, neighbourID)); cur <= 0 || peak < cur {
		t.Errorf("the neighbour's memory by /metrics: %.0f B now, peak %.0f B; want some, and a peak at least that", cur, peak)
	}
	if n, _ := value(fmt.Sprintf(`flock_agent_restarts_total{agent="%d"}`, memHogID)); n < 1 {
		t.Errorf("the memory hog restarted %.0f times by /metrics, want at least once", n)
	}
	var lines []string
	for _, l := range strings.Split(expo, "\n") {
		if strings.HasPrefix(l, "flock_agent_memory") || strings.HasPrefix(l, "flock_agent_cpu") || strings.HasPrefix(l, "flock_agent_restarts") || strings.HasPrefix(l, "flock_agent_last_exit") {
			lines = append(lines, l)
		}
	}
	t.Logf("/metrics in the VM (cgroup v2):\n%s", strings.Join(lines, "\n"))
}

// cgroupWatch is probe cgroup's report of one cgroup.
type cgroupWatch struct {
	Path     string            `json:"path"`
	Samples  int               `json:"samples"`
	Absent   int               `json:"absent"`
	Max      map[string]uint64 `json:"max"`
	Events   map[string]uint64 `json:"events"`
	CPUUsec  uint64            `json:"cpu_usage_usec"`
	WallUsec uint64            `json:"wall_usec"`
}

// oomReport is the kernel's account of one memcg OOM kill: the cgroup's
// usage and limit when it had to kill, and which cgroup it was.
var (
	memUsageRe = regexp.MustCompile(`memory: usage (\d+)kB, limit (\d+)kB`)
	oomKillRe  = regexp.MustCompile(`oom-kill:.*oom_memcg=(\S+?),`)
)

func checkMemoryHog(t *testing.T, v *harness.VM, w cgroupWatch) {
	unit := unitName(memHogID)
	if got := vmProps(t, v, unit, "MemoryMax")["MemoryMax"]; got != strconv.Itoa(memLimit) {
		t.Errorf("%s MemoryMax = %s, want %d", unit, got, memLimit)
	}
	// Killed and restarted more than once: the policy holds, and the
	// limit is not a one-off.
	var p map[string]string
	v.Eventually(t, 2*time.Minute, func() error {
		p = vmProps(t, v, unit, "NRestarts", "RestartUSec", "Result")
		if n, _ := strconv.Atoi(p["NRestarts"]); n < 2 {
			return fmt.Errorf("%s NRestarts=%s, want >= 2", unit, p["NRestarts"])
		}
		return nil
	})
	unitLog := mustRun(t, v, "journalctl", "--no-pager", "-o", "cat", "-u", unit)
	if !strings.Contains(unitLog, "Failed with result 'oom-kill'") {
		t.Errorf("%s never failed with result 'oom-kill'; its journal:\n%s", unit, harness.TailLines(unitLog, 30))
	}
	// The kernel's OOM reports: each usage line belongs to the oom-kill
	// line that follows it.
	var usageKB, limitKB []uint64
	var pending []string
	for _, l := range strings.Split(mustRun(t, v, "journalctl", "-k", "--no-pager", "-o", "cat"), "\n") {
		if m := memUsageRe.FindStringSubmatch(l); m != nil {
			pending = m
		} else if m := oomKillRe.FindStringSubmatch(l); m != nil && pending != nil {
			if strings.HasSuffix(m[1], "/"+unit) {
				u, _ := strconv.ParseUint(pending[1], 10, 64)
				lim, _ := strconv.ParseUint(pending[2], 10, 64)
				usageKB, limitKB = append(usageKB, u), append(limitKB, lim)
			}
			pending = nil
		}
	}
	if len(usageKB) == 0 {
		t.Fatalf("no kernel OOM report for %s in journalctl -k", unit)
	}
	for i := range usageKB {
		if limitKB[i] != memLimit>>10 || usageKB[i] > limitKB[i] || usageKB[i] < limitKB[i]*9/10 {
			t.Errorf("OOM kill %d: usage %d kB, limit %d kB; want killed at the limit %d kB", i+1, usageKB[i], limitKB[i], memLimit>>10)
		}
	}
	// The kernel lets a charge through over the limit while the OOM
	// victim dies ("force" in mm/memcontrol.c try_charge_memcg: it will
	// free memory very soon), one charge of at most a batch of 64 pages:
	// the peak may pass MemoryMax by that and no more (seen: 3 pages).
	const forcedCharge = 64 * 4096
	peak := max(w.Max["memory.peak"], w.Max["memory.current"])
	if peak > memLimit+forcedCharge {
		t.Errorf("memory peak %d B above MemoryMax %d B by more than the kernel's forced charge (%d B)", peak, memLimit, forcedCharge)
	}
	t.Logf("FIGURE memory: %d OOM kills at usage %v kB vs MemoryMax %d kB; memory.peak sampled %.1f MiB; memory.events oom_kill %d; NRestarts %s (RestartUSec %s)",
		len(usageKB), usageKB, memLimit>>10, float64(peak)/(1<<20), w.Events["memory.events.oom_kill"], p["NRestarts"], p["RestartUSec"])
}

func checkForkBomb(t *testing.T, v *harness.VM, w cgroupWatch) {
	unit := unitName(forkBombID)
	p := vmProps(t, v, unit, "TasksMax", "TasksCurrent", "NRestarts", "ActiveState")
	if p["TasksMax"] != strconv.Itoa(tasksLimit) {
		t.Errorf("%s TasksMax = %s, want %d", unit, p["TasksMax"], tasksLimit)
	}
	if w.Samples == 0 {
		t.Fatalf("%s: no sample of its cgroup %s", unit, w.Path)
	}
	// pids.peak is the tasks that stood. pids.current is not a bound to
	// hold: the kernel charges a fork before it compares with the limit
	// and takes a refused one back, so it may read TasksMax+1 for that
	// instant (seen: 21 against a peak of 20). It stands in only where
	// the kernel has no pids.peak (before Linux 6.1).
	top, what := w.Max["pids.peak"], "pids.peak"
	if top == 0 {
		top, what = w.Max["pids.current"], "pids.current"
	}
	if top > tasksLimit {
		t.Errorf("%s reached %d tasks (%s), above TasksMax %d", unit, top, what, tasksLimit)
	}
	if w.Events["pids.events.max"] == 0 {
		t.Errorf("%s: pids.events max is 0: no fork was refused for the limit (%v)", unit, w.Events)
	}
	var refused map[string]int
	v.Eventually(t, time.Minute, func() error {
		b, err := v.ReadFile(agentsDir + "/" + strconv.Itoa(forkBombID) + "/forkbomb.json")
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &refused)
	})
	if refused["EAGAIN"] == 0 {
		t.Errorf("the bomb's forks were not refused with EAGAIN: %v", refused)
	}
	t.Logf("FIGURE tasks: max %d tasks sampled (%d samples; pids.peak %d) vs TasksMax %d; %d forks refused by the cgroup (pids.events max); the bomb's own refusals %v; unit %s, NRestarts %s",
		w.Max["pids.current"], w.Samples, w.Max["pids.peak"], tasksLimit, w.Events["pids.events.max"], refused, p["ActiveState"], p["NRestarts"])
}

func checkCPUHog(t *testing.T, v *harness.VM, w cgroupWatch) {
	unit := unitName(cpuHogID)
	if got := vmProps(t, v, unit, "CPUQuotaPerSecUSec")["CPUQuotaPerSecUSec"]; got != "200ms" {
		t.Errorf("%s CPUQuotaPerSecUSec = %s, want 200ms", unit, got)
	}
	if w.Absent > 0 || w.WallUsec < uint64(10*time.Second/time.Microsecond) {
		t.Fatalf("%s: want 10 s or more of one run, got %d samples over %d us (%d absent)", unit, w.Samples, w.WallUsec, w.Absent)
	}
	pct := 100 * float64(w.CPUUsec) / float64(w.WallUsec)
	if bound := cpuQuotaPct * 1.1; pct > bound {
		t.Errorf("%s used %.1f%% of a CPU over %.1f s, above its quota %.0f%% + 10%% (%.1f%%)", unit, pct, float64(w.WallUsec)/1e6, cpuQuotaPct, bound)
	}
	t.Logf("FIGURE cpu: %.1f%% of a CPU over %.1f s (two busy loops) vs CPUQuota %.0f%% (bound %.1f%%)",
		pct, float64(w.WallUsec)/1e6, cpuQuotaPct, cpuQuotaPct*1.1)
}

// heartbeats is probe heartbeats' report.
type heartbeats struct {
	Count  int       `json:"count"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	GapsMS []float64 `json:"gaps_ms"`
}

func checkNeighbour(t *testing.T, v *harness.VM, mainPID string, recordStart time.Time) {
	unit := unitName(neighbourID)
	p := vmProps(t, v, unit, "MainPID", "NRestarts", "ActiveState")
	if p["ActiveState"] != "active" || p["MainPID"] != mainPID || p["NRestarts"] != "0" {
		t.Errorf("%s did not run undisturbed: %v (MainPID was %s)", unit, p, mainPID)
	}
	mustRun(t, v, "systemctl", "stop", recorderUnit)
	var hb heartbeats
	v.Eventually(t, time.Minute, func() error {
		b, err := v.ReadFile(recorderOut)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &hb)
	})
	// Continuity, not speed: heartbeats arrived from before the hogs came
	// until after they had been watched.
	recorded := time.Since(recordStart)
	if span := hb.Last.Sub(hb.First); hb.Count < 2 || span < watchFor {
		t.Fatalf("%d heartbeats of agent %d over %v of %v recorded, want them throughout (at least %v)",
			hb.Count, neighbourID, span.Round(time.Millisecond), recorded.Round(time.Second), watchFor)
	}
	delays := make([]float64, len(hb.GapsMS))
	worst := 0.0
	for i, g := range hb.GapsMS {
		delays[i] = g - 1000 // the interval is 1 s
		worst = max(worst, delays[i])
	}
	t.Logf("FIGURE heartbeat: %d heartbeats over %.1f s; delay (gap - 1 s) p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		hb.Count, hb.Last.Sub(hb.First).Seconds(), percentile(delays, 50), percentile(delays, 99), worst)
}
