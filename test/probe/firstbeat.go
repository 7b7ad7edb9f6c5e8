package main

// probe first-heartbeat: how long from starting a command to agent ID's
// first heartbeat, as the operator sees it; the benchmarks' measure of
// start-up, the same for a flock unit and a raw podman or runsc run.

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// firstHeartbeat subscribes agent.<id>.heartbeat as the operator, starts
// argv, and prints the milliseconds until the first heartbeat. A command
// still running then (a raw podman or runsc run) gets SIGTERM and is
// waited for; one that exits (systemctl start) must exit 0.
func firstHeartbeat(args []string) error {
	fl := flag.NewFlagSet("first-heartbeat", flag.ContinueOnError)
	id := fl.Int("agent", 0, "the agent whose first heartbeat ends the clock")
	timeout := fl.Duration("timeout", time.Minute, "give up after this long")
	if err := fl.Parse(args); err != nil {
		return err
	}
	argv := fl.Args()
	if *id <= 0 || len(argv) == 0 {
		return fmt.Errorf("usage: probe first-heartbeat -agent ID -- ARGV...")
	}
	nc, err := operatorConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	beat := make(chan time.Time, 1)
	sub, err := nc.Subscribe(wire.Heartbeat(*id), func(*nats.Msg) {
		select {
		case beat <- time.Now():
		default:
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var got time.Time
	select {
	case got = <-beat:
	case <-time.After(*timeout):
		_ = cmd.Process.Kill()
		return fmt.Errorf("no heartbeat from agent %d within %v of starting %v", *id, *timeout, argv)
	}
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("%v: %w", argv, err)
		}
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	fmt.Printf("%.3f\n", float64(got.Sub(start).Microseconds())/1000)
	return nil
}
