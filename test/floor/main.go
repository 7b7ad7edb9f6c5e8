// Command floor is the cost floor `flockctl provision` is measured against:
// what provisioning N agents costs with nothing of flock's own on top.
// It writes the same sysusers.d drop-in and runs systemd-sysusers once,
// creates the same directories, and starts the same hardened transient
// units straight over D-Bus, pipelined as flockctl does, with no
// observation, diff, firewall or state. It creates flock's own names, so
// `flockctl deprovision --all --purge` removes what it made.
//
//	floor N              provision N default agents the raw way; print
//	                     seconds taken
//	floor start SPEC ID  start agent ID's unit of SPEC straight over D-Bus
//	                     (on a provisioned flock: users, table, bus there)
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "start":
		err = startOne(context.Background(), os.Args[2], os.Args[3])
	case len(os.Args) == 2:
		var n int
		if n, err = strconv.Atoi(os.Args[1]); err == nil {
			err = run(context.Background(), n)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: floor N | floor start SPEC ID")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int) error {
	f, err := spec.Count(n)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := os.WriteFile(users.SysusersPath, []byte(users.RenderSysusers(users.Accounts(f))), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "systemd-sysusers", users.SysusersPath).CombinedOutput(); err != nil {
		return fmt.Errorf("systemd-sysusers: %w: %s", err, out)
	}
	if err := users.NewHost().EnsurePaths(ctx, users.Paths(f)); err != nil {
		return err
	}
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8) // flockctl's parallelism
	for _, a := range f.Agents {
		u := units.ForAgent(f, a, units.Options{})
		props := u.DBusProperties()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			done := make(chan string, 1)
			if _, err := conn.StartTransientUnitContext(ctx, u.Name, "fail", props, done); err != nil {
				errs <- fmt.Errorf("%s: %w", u.Name, err)
				return
			}
			if r := <-done; r != "done" {
				errs <- fmt.Errorf("%s: start job %s", u.Name, r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Printf("%.3f\n", time.Since(start).Seconds())
	return nil
}

// startOne starts one agent's unit as flockctl would, with nothing else:
// the benchmarks' way to time a unit's start alone.
func startOne(ctx context.Context, file, rawID string) error {
	f, err := spec.Load(file)
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(rawID)
	if err != nil {
		return err
	}
	a, ok := f.Agent(id)
	if !ok {
		return fmt.Errorf("no agent %d in %s", id, file)
	}
	u := units.ForAgent(f, a, units.Options{Runtimes: sandbox.HostRuntimes()})
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, u.Name, "fail", u.DBusProperties(), done); err != nil {
		return fmt.Errorf("%s: %w", u.Name, err)
	}
	if r := <-done; r != "done" {
		return fmt.Errorf("%s: start job %s", u.Name, r)
	}
	return nil
}
