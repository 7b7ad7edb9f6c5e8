// Command floor is the cost floor flock is measured against in make bench:
// what flock's work costs done the raw way, with nothing of flock's own on
// top (no observation, diff, plan, bus or state). It creates flock's own
// names, so `flockctl deprovision --all --purge` removes what it made.
//
//	floor N              provision N default agents the raw way, as
//	                     flockctl would: the sysusers.d drop-in and one
//	                     systemd-sysusers run, a seed per agent (its own,
//	                     0400, in the 0700 credentials directory, as the
//	                     unit binds it), the directories, the nft table in
//	                     one netlink batch, and the same hardened transient
//	                     units started straight over D-Bus, 8 at a time
//	                     (flockctl's parallelism); prints seconds taken
//	floor deprovision N  stop those N units over D-Bus, 8 at a time, and
//	                     remove the users, the nft table, the directories
//	                     and the seeds; prints seconds taken
//	floor start SPEC ID  start agent ID's unit of SPEC straight over D-Bus
//	                     (on a provisioned flock: users, table, bus there)
//	floor walls SPEC ID REPS
//	                     systemd's own set-up time of a unit as agent
//	                     ID's user with each group of its unit's walls
//	                     (wallGroups), none, and all; one JSON object
//	floor bare-bus ADDR DIR
//	                     a bare nats-server (JetStream on, stored in DIR, no
//	                     users, no permissions) on ADDR, with one in-process
//	                     client keeping each agent's last heartbeat as
//	                     flock's bus does; runs until SIGTERM (its
//	                     clients: floor-client, test/floor/client)
//	floor usage PID|agents...
//	                     print "now UPTIME", then "PID CPU_SECONDS RSS_BYTES"
//	                     for each PID ("agents": every process of an
//	                     agent's uid)
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// parallel is flockctl's bound on concurrent unit jobs (plan.parallelStarts).
const parallel = 8

func main() {
	ctx := context.Background()
	a := os.Args[1:]
	var err error
	switch {
	case len(a) == 1:
		err = timed(ctx, a[0], provision)
	case len(a) == 2 && a[0] == "deprovision":
		err = timed(ctx, a[1], deprovision)
	case len(a) == 3 && a[0] == "start":
		err = startOne(ctx, a[1], a[2])
	case len(a) == 4 && a[0] == "walls":
		err = wallsCost(ctx, a[1], a[2], a[3])
	case len(a) == 3 && a[0] == "bare-bus":
		err = bareBus(a[1], a[2])
	case len(a) >= 2 && a[0] == "usage":
		err = usage(a[1:])
	default:
		fmt.Fprintln(os.Stderr, "usage: floor N | floor deprovision N | floor start SPEC ID | floor walls SPEC ID REPS | floor bare-bus ADDR DIR | floor usage PID|agents...")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// timed runs fn on the default flock of rawN agents and prints the seconds
// it took.
func timed(ctx context.Context, rawN string, fn func(context.Context, *spec.Flock) error) error {
	n, err := strconv.Atoi(rawN)
	if err != nil {
		return fmt.Errorf("agent count: %w", err)
	}
	f, err := spec.Count(n)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := fn(ctx, f); err != nil {
		return err
	}
	fmt.Printf("%.3f\n", time.Since(start).Seconds())
	return nil
}

// provision makes what flockctl provision makes for f but the bus, in
// flock's order: users, seeds, paths (the seeds handed to their agents),
// firewall, units.
func provision(ctx context.Context, f *spec.Flock) error {
	if err := os.MkdirAll(filepath.Dir(users.SysusersPath), 0o755); err != nil {
		return fmt.Errorf("sysusers.d: %w", err)
	}
	if err := os.WriteFile(users.SysusersPath, []byte(users.RenderSysusers(users.Accounts(f))), 0o644); err != nil {
		return fmt.Errorf("sysusers drop-in: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "systemd-sysusers", users.SysusersPath).CombinedOutput(); err != nil {
		return fmt.Errorf("systemd-sysusers: %w: %s", err, out)
	}
	// The units bind each agent's seed (BindReadOnlyPaths=): without it
	// they would not start. creds.Store writes it as flock does.
	seeds := creds.Store{Dir: creds.DefaultCredDir}
	for _, a := range f.Agents {
		if _, _, err := seeds.Ensure(ctx, spec.UserName(a.ID)); err != nil {
			return fmt.Errorf("seed of agent %d: %w", a.ID, err)
		}
	}
	if err := users.NewHost().EnsurePaths(ctx, append(users.Paths(f), users.Seeds(f)...)); err != nil {
		return fmt.Errorf("paths: %w", err)
	}
	if err := netpolicy.New().Ensure(ctx, netpolicy.ForFlock(f)); err != nil {
		return fmt.Errorf("nft table: %w", err)
	}
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer conn.Close()
	return eachUnit(f, func(a spec.Agent) error {
		return startUnit(ctx, conn, units.ForAgent(f, a, units.Options{}))
	})
}

// startUnit starts u straight over D-Bus and waits for its start job, as
// systemd's own floor: no stop first, no retry.
func startUnit(ctx context.Context, conn *sd.Conn, u units.Unit) error {
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, u.Name, "fail", u.DBusProperties(), done); err != nil {
		return fmt.Errorf("%s: %w", u.Name, err)
	}
	if r := <-done; r != "done" {
		return fmt.Errorf("%s: start job %s", u.Name, r)
	}
	return nil
}

// deprovision undoes provision the raw way: stop jobs pipelined, then the
// users, the table and the files. It does not wait for systemd to collect
// the stopped units, which flockctl does (units.Systemd.Stop).
func deprovision(ctx context.Context, f *spec.Flock) error {
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer conn.Close()
	err = eachUnit(f, func(a spec.Agent) error {
		name := spec.UnitName(a.ID)
		done := make(chan string, 1)
		if _, err := conn.StopUnitContext(ctx, name, "replace", done); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if r := <-done; r != "done" {
			return fmt.Errorf("%s: stop job %s", name, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := users.NewHost().RemoveAll(ctx); err != nil {
		return fmt.Errorf("users: %w", err)
	}
	if err := netpolicy.New().Remove(ctx); err != nil {
		return fmt.Errorf("nft table: %w", err)
	}
	if err := os.RemoveAll(f.Root); err != nil {
		return fmt.Errorf("agents' directories: %w", err)
	}
	if err := (creds.Store{Dir: creds.DefaultCredDir}).RemoveAll(ctx); err != nil {
		return fmt.Errorf("seeds: %w", err)
	}
	return nil
}

// eachUnit runs job for every agent of f, parallel at a time, and returns
// the first error.
func eachUnit(f *spec.Flock, job func(spec.Agent) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(f.Agents))
	sem := make(chan struct{}, parallel)
	for _, a := range f.Agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := job(a); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when closed empty
}

// startOne starts one agent's unit as flockctl would, with nothing else:
// the benchmarks' way to time a unit's start alone.
func startOne(ctx context.Context, file, rawID string) error {
	u, err := agentUnit(file, rawID)
	if err != nil {
		return err
	}
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer conn.Close()
	return startUnit(ctx, conn, u)
}

// agentUnit is the unit flockctl plans for agent rawID of the spec file.
func agentUnit(file, rawID string) (units.Unit, error) {
	f, err := spec.Load(file)
	if err != nil {
		return units.Unit{}, err
	}
	id, err := strconv.Atoi(rawID)
	if err != nil {
		return units.Unit{}, fmt.Errorf("agent id: %w", err)
	}
	a, ok := f.Agent(id)
	if !ok {
		return units.Unit{}, fmt.Errorf("no agent %d in %s", id, file)
	}
	return units.ForAgent(f, a, units.Options{Runtimes: sandbox.HostRuntimes()}), nil
}

// bareBus is the idle floor of flock.service: the same server library
// with JetStream, no auth, and a subscriber to every heartbeat.
func bareBus(addr, dir string) error {
	host, rawPort, err := splitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(rawPort)
	if err != nil {
		return fmt.Errorf("port: %w", err)
	}
	ns, err := server.NewServer(&server.Options{Host: host, Port: port, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("nats-server not ready within 10s")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		return fmt.Errorf("in-process client: %w", err)
	}
	defer nc.Close()
	var mu sync.Mutex
	last := map[string][]byte{}
	if _, err := nc.Subscribe(wire.AllHeartbeats, func(m *nats.Msg) {
		mu.Lock()
		last[m.Subject] = m.Data
		mu.Unlock()
	}); err != nil {
		return fmt.Errorf("subscribing heartbeats: %w", err)
	}
	waitSignal()
	return nil
}

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", "", fmt.Errorf("%q: want HOST:PORT", addr)
	}
	return addr[:i], addr[i+1:], nil
}

func waitSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux flock runs on.
const clockTicks = 100

// usage prints the machine's uptime ("now SECONDS", the snapshot's clock)
// and each process's CPU time so far and resident memory; "agents" stands
// for every process of an agent's uid. A process gone meanwhile is left out.
func usage(args []string) error {
	var pids []string
	for _, a := range args {
		if a != "agents" {
			pids = append(pids, a)
			continue
		}
		agents, err := agentPIDs()
		if err != nil {
			return err
		}
		pids = append(pids, agents...)
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return fmt.Errorf("uptime: %w", err)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "now %s\n", strings.Fields(string(up))[0])
	for _, pid := range pids {
		stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		if err != nil {
			continue
		}
		// Fields after the command, which may hold spaces: state is [0],
		// utime [11], stime [12].
		_, after, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(after)
		if len(f) < 13 {
			return fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		rss, err := statusField(pid, "VmRSS:")
		if err != nil {
			continue // a kernel thread or gone: no memory of its own
		}
		fmt.Fprintf(w, "%s %.2f %d\n", pid, (ut+st)/clockTicks, rss*1024)
	}
	return nil
}

// agentPIDs are the processes whose real uid is an agent's of the default
// uid base.
func agentPIDs() ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		uid, err := statusField(e.Name(), "Uid:")
		if err == nil && uid > spec.DefaultUIDBase && uid <= spec.DefaultUIDBase+spec.MaxID {
			pids = append(pids, e.Name())
		}
	}
	return pids, nil
}

// statusField is the first number of /proc/PID/status's line key.
func statusField(pid, key string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseUint(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%s/status: no %s", pid, key)
}
