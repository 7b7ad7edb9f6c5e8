package test

// Tier: root + nspawn. Benchmarks, not tests: each prints rows of make
// bench's table (test/benchrow), flock's figures against a floor measured
// in the same machine in the same run, and asserts nothing about speed.
//
//	go test ./test/ -run '^$' -bench 'Provision|Idle' -benchtime 1x
//	FLOCK_BENCH_QUICK=1 go test ...   the short form: N ≤ 100, one repetition

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/test/harness"
)

// The floors' descriptions, once for every N.
const (
	floorProvision = "floor N"
	noteProvision  = "floor N (test/floor): the same users (one systemd-sysusers run of the same drop-in), seeds (0400, the agent's) and directories, the same table inet flock in one nft batch, and the same hardened transient units started straight over D-Bus 8 at a time as flockctl does; no bus, no observation, no plan."
	floorShow      = "systemctl list-units"
	noteShow       = "systemctl list-units --all 'flock-agent@*': systemd's own listing of the same units and their states, one D-Bus call. flockctl also reads each unit's restarts and exit, users, paths, seeds, the nft table and the bus."
	floorDeprov    = "floor deprovision N"
	noteDeprov     = "floor deprovision N: stop jobs of the N units over D-Bus, 8 at a time (not waiting for systemd to collect them, which flockctl does before it may start one of that name again), then userdel of the same users, the nft table, the directories and seeds removed; no bus."
	floorStartOne  = "floor start"
	noteStartOne   = "floor start SPEC ID: agent N+1's unit started straight over D-Bus, its user, seed, directories and firewall rule already there. flockctl adds the user, seed, directories, bus identity and reload, and the firewall rule too."
)

// BenchmarkProvision provisions N agents with flockctl and with the floor,
// alternating which goes first, and at 100 and 1000 also times a no-op
// re-provision, flockctl status and adding one agent. Each flock is
// deprovisioned (timed) before the next.
func BenchmarkProvision(b *testing.B) {
	// Tier: root + nspawn.
	m := harness.Boot(b)
	reps := benchrow.Reps(3)
	for _, n := range benchrow.Ns(10, 100, 300, 1000) {
		var provFlock, provFloor, deprovFlock, deprovFloor, noop, stat, show, addFlock, addFloor []float64
		lifecycle := n == 100 || n == 1000
		for rep := range reps {
			floor := func() {
				// Wall time, not the time the floor prints: flock's
				// figures include starting a process in the machine.
				provFloor = append(provFloor, timed(b, m, "floor", strconv.Itoa(n)))
				deprovFloor = append(deprovFloor, timed(b, m, "floor", "deprovision", strconv.Itoa(n)))
				// What the floor made is flock's: flockctl finds nothing left.
				mustRun(b, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
			}
			if rep%2 == 0 { // neither always meets a warmer systemd
				floor()
			}
			provFlock = append(provFlock, timed(b, m, "flockctl", "provision", "--agents", strconv.Itoa(n)))
			if got := strings.Count(mustRun(b, m, "systemctl", "list-units", "flock-agent@*", "--state=active", "--no-legend", "--plain"), "\n"); got != n {
				b.Fatalf("%d agent units active, want %d", got, n)
			}
			if lifecycle {
				noop = append(noop, timed(b, m, "flockctl", "provision", "--agents", strconv.Itoa(n)))
				// Agents may still be connecting: status exits 3 then.
				stat = append(stat, timing(func() { statusOut(b, m) }))
				show = append(show, timed(b, m, listUnits...))
				f, c := addOne(b, m, n)
				addFlock, addFloor = append(addFlock, f), append(addFloor, c)
			}
			deprovFlock = append(deprovFlock, timed(b, m, "flockctl", "deprovision", "--yes", "--all", "--purge"))
			if rep%2 == 1 {
				floor()
			}
		}
		benchrow.Print(b, benchrow.Row{Group: "provision", What: "provision N agents", Floor: floorProvision, Note: noteProvision,
			N: n, Unit: "s", Flock: provFlock, Base: provFloor})
		benchrow.Print(b, benchrow.Row{Group: "deprovision", What: "deprovision --all --purge", Floor: floorDeprov, Note: noteDeprov,
			N: n, Unit: "s", Flock: deprovFlock, Base: deprovFloor})
		if lifecycle {
			benchrow.Print(b, benchrow.Row{Group: "status", What: "no-op re-provision", Floor: floorShow, Note: noteShow,
				N: n, Unit: "s", Flock: noop, Base: show, Goal: "≤ 1 s"})
			benchrow.Print(b, benchrow.Row{Group: "status", What: "flockctl status", Floor: floorShow, Note: noteShow,
				N: n, Unit: "s", Flock: stat, Base: show, Goal: "≤ 1 s"})
			benchrow.Print(b, benchrow.Row{Group: "add one", What: "one agent added to N", Floor: floorStartOne, Note: noteStartOne,
				N: n, Unit: "s", Flock: addFlock, Base: addFloor, Goal: "≤ 1 s"})
		}
	}
}

// addOne times adding agent n+1 to a flock of n with flockctl, then its
// floor: the same unit, stopped and collected, started over D-Bus alone.
// It leaves the flock of n it found.
func addOne(b *testing.B, m *harness.Machine, n int) (flock, floor float64) {
	b.Helper()
	flock = timed(b, m, "flockctl", "provision", "--agents", strconv.Itoa(n+1))
	stopCollected(b, m, unitName(n+1))
	writeSpec(b, m, fmt.Sprintf("agents: {count: %d}\n", n+1))
	floor = timed(b, m, "floor", "start", specPath, strconv.Itoa(n+1))
	mustRun(b, m, "flockctl", "provision", "--agents", strconv.Itoa(n))
	return flock, floor
}

// stopCollected stops the transient units and waits until systemd has
// collected them: until then starting one of the same name over D-Bus
// fails ("already loaded").
func stopCollected(b *testing.B, m *harness.Machine, units ...string) {
	b.Helper()
	mustRun(b, m, append([]string{"systemctl", "stop"}, units...)...)
	m.Eventually(b, 30*time.Second, func() error {
		if out, _, _ := run(b, m, append([]string{"systemctl", "list-units", "--all", "--no-legend", "--plain"}, units...)...); strings.TrimSpace(out) != "" {
			return fmt.Errorf("not collected yet: %s", out)
		}
		return nil
	})
}

// listUnits is systemd's own listing of the agents' units with their
// states: one D-Bus call, the least any report on them can cost.
var listUnits = []string{"systemctl", "list-units", "--all", "--no-legend", "--plain", "flock-agent@*"}

// timed is argv's wall time in seconds, run in the machine; it fails the
// benchmark unless argv succeeds.
func timed(b *testing.B, m *harness.Machine, argv ...string) float64 {
	b.Helper()
	return timing(func() { mustRun(b, m, argv...) })
}

// timing is how long do took, in seconds.
func timing(do func()) float64 {
	start := time.Now()
	do()
	return time.Since(start).Seconds()
}

// BenchmarkIdle measures the idle flock: N agents connected and
// heartbeating (every 30 s, the default), over windows of 30 s (10 s in
// the short form): flock.service's CPU and RSS, every agent's RSS and the
// CPU of all agents. Then the floor in the same machine, the flock gone:
// a bare nats-server (test/floor bare-bus) with N bare client connections
// heartbeating alike (test/floor/client, installed as floor-client), and
// one more bare client in its own process.
func BenchmarkIdle(b *testing.B) {
	// Tier: root + nspawn.
	n := 1000
	window := 30 * time.Second
	if benchrow.Quick() {
		n, window = 100, 10*time.Second
	}
	reps := benchrow.Reps(3)
	client := filepath.Join(harness.Build(b, nil, "./test/floor/client"), "client")
	m := harness.BootWith(b, harness.Options{Binaries: map[string]string{"floor-client": client}})

	mustRun(b, m, "flockctl", "provision", "--agents", strconv.Itoa(n))
	m.Eventually(b, 3*time.Minute, func() error {
		st := status(b, m)
		for _, a := range st {
			if a.State != "active" || a.Bus != "connected" || a.LastHeartbeat == nil {
				return fmt.Errorf("agent %d: %s, bus %q, heartbeat %v", a.ID, a.State, a.Bus, a.LastHeartbeat)
			}
		}
		if len(st) != n {
			return fmt.Errorf("%d agents in status, want %d", len(st), n)
		}
		return nil
	})
	time.Sleep(window) // past start-up: the last agents started moments ago
	busPID := strings.TrimSpace(mustRun(b, m, "systemctl", "show", "-p", "MainPID", "--value", "flock.service"))
	var busCPU, busRSS, agentsCPU, agentRSS []float64
	for range reps {
		before := usage(b, m, busPID, "agents")
		time.Sleep(window)
		after := usage(b, m, busPID, "agents")
		busCPU = append(busCPU, percentOfCore(before, after, only(busPID)))
		busRSS = append(busRSS, mib(after.procs[busPID].rss))
		agentsCPU = append(agentsCPU, percentOfCore(before, after, except(busPID)))
		agentRSS = agentRSS[:0]
		for pid, p := range after.procs {
			if pid != busPID {
				agentRSS = append(agentRSS, mib(p.rss))
			}
		}
	}
	if len(agentRSS) != n {
		b.Logf("%d agent processes, %d agents", len(agentRSS), n)
	}
	mustRun(b, m, "flockctl", "deprovision", "--yes", "--all", "--purge")

	const bareURL = "nats://127.0.0.1:4333"
	mustRun(b, m, "systemd-run", "--unit=floor-bus", "-p", "Type=exec", "floor", "bare-bus", "127.0.0.1:4333", "/var/tmp/floor-bus")
	b.Cleanup(func() { _, _, _ = run(b, m, "systemctl", "stop", "floor-bus", "floor-clients", "floor-client") })
	mustRun(b, m, "systemd-run", "--unit=floor-clients", "-p", "Type=exec", "floor-client", "1", strconv.Itoa(n), bareURL, "/run/floor-clients.ready")
	mustRun(b, m, "systemd-run", "--unit=floor-client", "-p", "Type=exec", "floor-client", strconv.Itoa(n+1), strconv.Itoa(n+1), bareURL, "/run/floor-client.ready")
	m.Eventually(b, time.Minute, func() error {
		_, _, err := run(b, m, "test", "-e", "/run/floor-clients.ready", "-a", "-e", "/run/floor-client.ready")
		return err
	})
	time.Sleep(window)
	barePID := strings.TrimSpace(mustRun(b, m, "systemctl", "show", "-p", "MainPID", "--value", "floor-bus"))
	clientPID := strings.TrimSpace(mustRun(b, m, "systemctl", "show", "-p", "MainPID", "--value", "floor-client"))
	var bareCPU, bareRSS, clientRSS []float64
	for range reps {
		before := usage(b, m, barePID)
		time.Sleep(window)
		after := usage(b, m, barePID, clientPID)
		bareCPU = append(bareCPU, percentOfCore(before, after, only(barePID)))
		bareRSS = append(bareRSS, mib(after.procs[barePID].rss))
		clientRSS = append(clientRSS, mib(after.procs[clientPID].rss))
	}
	mustRun(b, m, "systemctl", "stop", "floor-bus", "floor-clients", "floor-client")

	const (
		floorBus = "bare nats-server"
		noteBus  = "test/floor bare-bus: nats-server (the same library) with JetStream on, no users or permissions, one in-process subscriber keeping each agent's last heartbeat; N bare connections (one floor-client process) heartbeating every 30 s. Measured after the flock is gone, over windows of the same length."
		floorCli = "bare client"
		noteCli  = "floor-client (test/floor/client, nats.go alone): one connection heartbeating every 30 s, alone in its process; flock-agent's RSS is per agent (reps = agents)."
	)
	benchrow.Print(b, benchrow.Row{Group: "idle", What: "flock.service RSS, N agents connected", Floor: floorBus, Note: noteBus,
		N: n, Unit: "MiB", Flock: busRSS, Base: bareRSS, Goal: "≤ 300 MB at 1000"})
	benchrow.Print(b, benchrow.Row{Group: "idle", What: fmt.Sprintf("flock.service CPU over %v", window), Floor: floorBus, Note: noteBus,
		N: n, Unit: "% core", Flock: busCPU, Base: bareCPU, Goal: "≤ 5% at 1000"})
	benchrow.Print(b, benchrow.Row{Group: "idle", What: "flock-agent RSS, idle", Floor: floorCli, Note: noteCli,
		N: n, Unit: "MiB", Flock: slices.Clone(agentRSS), Base: clientRSS, Goal: "≤ 12 MB"})
	benchrow.Print(b, benchrow.Row{Group: "idle", What: fmt.Sprintf("all agents' CPU over %v", window),
		N: n, Unit: "% core", Flock: agentsCPU})
}

// snapshot is `floor usage` in the machine: its uptime, and each
// process's CPU seconds so far and resident bytes by PID.
type snapshot struct {
	now   float64
	procs map[string]procUsage
}

type procUsage struct{ cpu, rss float64 }

// usage snapshots pids ("agents": every agent process) in the machine.
func usage(b *testing.B, m *harness.Machine, pids ...string) snapshot {
	b.Helper()
	out := mustRun(b, m, append([]string{"floor", "usage"}, pids...)...)
	s := snapshot{procs: map[string]procUsage{}}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		var err error
		switch {
		case len(f) == 2 && f[0] == "now":
			s.now, err = strconv.ParseFloat(f[1], 64)
		case len(f) == 3:
			var p procUsage
			if p.cpu, err = strconv.ParseFloat(f[1], 64); err == nil {
				p.rss, err = strconv.ParseFloat(f[2], 64)
			}
			s.procs[f[0]] = p
		default:
			err = fmt.Errorf("not PID CPU RSS")
		}
		if err != nil {
			b.Fatalf("floor usage: %q: %v", l, err)
		}
	}
	for _, pid := range pids {
		if _, ok := s.procs[pid]; !ok && pid != "agents" {
			b.Fatalf("floor usage: no process %s", pid)
		}
	}
	return s
}

// percentOfCore is the CPU the chosen processes (present in both
// snapshots) used between them, in percent of one core.
func percentOfCore(before, after snapshot, chosen func(pid string) bool) float64 {
	var used float64
	for pid, a := range after.procs {
		if p, ok := before.procs[pid]; ok && chosen(pid) {
			used += a.cpu - p.cpu
		}
	}
	return 100 * used / (after.now - before.now)
}

func only(pid string) func(string) bool   { return func(p string) bool { return p == pid } }
func except(pid string) func(string) bool { return func(p string) bool { return p != pid } }

func mib(bytes float64) float64 { return bytes / (1 << 20) }
