// Command demo runs flock's main job on the built-in 3-agent example
// (examples/flock.yaml): it provisions the flock, shows `flockctl status`
// and `systemctl status flock-agent@3`. On a systemd host it does so on the
// host itself (needs `make install` first); elsewhere it boots a throw-away
// systemd machine with the test harness, runs it there, and tears it down.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/flockrun/flock/test/harness"
)

func main() {
	specPath := flag.String("f", "examples/flock.yaml", "the spec to provision")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *specPath); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// steps are what the demo shows, as commands run where the flock lives.
func steps(spec string) [][]string {
	return [][]string{
		{"flockctl", "provision", "-f", spec},
		{"flockctl", "send", "hello from the flock"}, // a task, through the bus, to the worker
		{"flockctl", "status"},
		{"systemctl", "status", "--no-pager", "--lines=5", "flock-agent@3"},
		{"sh", "-c", "systemd-analyze security --no-pager flock-agent@3 | tail -n 1"},
		{"flockctl", "provision", "-f", spec}, // again: nothing to do
	}
}

func run(ctx context.Context, specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		fmt.Println("# this host runs systemd: provisioning on the host itself")
		for _, s := range steps(specPath) {
			if err := show(s, func() (string, error) {
				out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput()
				return string(out), err
			}); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Println("# PID 1 is not systemd here: booting a throw-away systemd machine (systemd-nspawn)")
	if err := harness.NspawnTier.Missing(); err != nil {
		return fmt.Errorf("this machine cannot boot the demo's systemd machine (make demo installs all of it):\n%w", err)
	}
	m, err := harness.Start(ctx, harness.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	const inside = "/root/flock.yaml"
	if err := m.WriteFile(inside, data, 0o644); err != nil {
		return err
	}
	for _, s := range steps(inside) {
		if err := show(s, func() (string, error) {
			stdout, stderr, err := m.Run(ctx, s...)
			return stdout + stderr, err
		}); err != nil {
			return err
		}
	}
	fmt.Println("# tearing the machine down")
	return nil
}

func show(argv []string, run func() (string, error)) error {
	fmt.Printf("\n$ %s\n", shellJoin(argv))
	out, err := run()
	fmt.Print(out)
	if err != nil && !notWell(argv, err) {
		return fmt.Errorf("%s: %w", shellJoin(argv), err)
	}
	return nil
}

// notWell says whether err is flockctl status's exit 3: an agent not (yet)
// well, which the table it printed shows; not the demo's failure.
func notWell(argv []string, err error) bool {
	code := -1
	var re *harness.RunError
	var ee *exec.ExitError
	switch {
	case errors.As(err, &re):
		code = re.ExitCode
	case errors.As(err, &ee):
		code = ee.ExitCode()
	}
	return code == 3 && len(argv) > 1 && argv[0] == "flockctl" && argv[1] == "status"
}

func shellJoin(argv []string) string { return strings.Join(argv, " ") }
