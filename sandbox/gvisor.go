package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// gvisor is level gvisor: the agent in a gVisor sandbox (runsc), whose
// own kernel answers its system calls.
type gvisor struct{}

func init() { Register(gvisor{}) }

func (gvisor) Level() Level { return GVisor }

// Profile: MapsWX, since the Sentry maps the code it runs, and
// OwnKernel, since it answers the agent's system calls itself.
func (gvisor) Profile() Profile {
	return Profile{Rank: 20, Label: "sandboxed (gVisor)", Walls: ContainerWalls,
		Runtime: Runtime{Name: "runsc", Default: "/usr/local/bin/runsc",
			Install: "make runsc (it builds runsc from the Go module proxy) or install gVisor's release"},
		MapsWX: true, SignalExit: true, OwnKernel: true, RuntimeTasks: gvisorTasks}
}

// gvisorTasks are the threads of runsc's sandbox (its Sentry and gofer,
// Go programs whose threads grow with the host's CPUs) beside the
// agent's own processes, whose systrap stubs count as the agent's: 52
// in a 2-CPU VM with an idle agent; the rest is room for a larger host.
const gvisorTasks = 256

func (gvisor) CheckRoot(rootfs, image string) (string, string) {
	switch {
	case image != "":
		return "image", "cannot be used with level gvisor, which runs an OCI bundle on a directory; unpack it (podman export) and give rootfs: " + RootfsExample
	case rootfs == "":
		return "level", "is gvisor, which needs a root file system: give rootfs: " + RootfsExample + " (a directory) or image: (podman's local store)"
	}
	return "", ""
}

// Launch writes the bundle, makes the rootfs's mount points, and runs
// runsc, passing SIGTERM on to the agent: runsc run does not forward
// signals to a container without a terminal.
func (gvisor) Launch(c Config, runsc, run string) error {
	if err := EnsureMountPoints(c.Rootfs, c.MountPoints()); err != nil {
		return err
	}
	bundle := filepath.Join(run, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(OCISpec(c), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return err
	}
	root := runscRoot(run)
	args := RunscArgs(c, run)
	fmt.Fprintln(os.Stderr, "flock-agent: sandbox:", runsc, strings.Join(args, " "))
	cmd := exec.Command(runsc, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: %s: %w", runsc, err)
	}
	go func() {
		for s := range sigs {
			kill := exec.Command(runsc, "--root", root, "kill", c.Name(), fmt.Sprint(int(s.(syscall.Signal))))
			if out, err := kill.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "flock-agent: sandbox: pass %v on: %v: %s\n", s, err, out)
			}
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() == runscFailed {
			showRunscLog(os.Stderr, run)
		}
		os.Exit(exit.ExitCode())
	}
	return err
}

// runscFailed is the status runsc exits with when it, not the agent,
// failed: creating, booting or waiting on the sandbox.
const runscFailed = 128

// showRunscLog copies the warnings and errors of runsc's logs in run
// (glog lines that begin W, E or F, and a Go crash's first line) to w,
// the journal, so that a sandbox that died while booting says why beside
// runsc's own one line: runsc's log first, then each of its processes'
// (RunscLogs), the sandbox's kernel's last; the last 30 lines in all.
func showRunscLog(w io.Writer, run string) {
	paths, _ := filepath.Glob(filepath.Join(RunscLogs(run), "*"))
	// The sandbox's kernel (boot) last: its error is why.
	sort.SliceStable(paths, func(i, j int) bool { return logCommand(paths[i]) != "boot" && logCommand(paths[j]) == "boot" })
	paths = append([]string{RunscLog(run)}, paths...)
	var lines []string
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(w, "flock-agent: sandbox: no runsc log: %v\n", err)
			continue
		}
		who := "runsc log"
		if path != RunscLog(run) {
			who = "runsc " + logCommand(path) + " log"
		}
		for _, l := range strings.Split(string(b), "\n") {
			if glogProblem(l) || strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
				lines = append(lines, who+": "+l)
			}
		}
	}
	const most = 30
	if len(lines) > most {
		lines = lines[len(lines)-most:]
	}
	for _, l := range lines {
		fmt.Fprintln(w, "flock-agent:", l)
	}
}

// glogProblem says whether l is a glog line of a warning, an error or a
// fatal error: "W1130 04:08:11.818306 ...".
func glogProblem(l string) bool {
	return len(l) > 5 && strings.ContainsRune("WEF", rune(l[0])) && strings.Trim(l[1:5], "0123456789") == ""
}

// logCommand is the process a log of RunscLogs is of: its name's
// second-to-last dotted part (runsc.log.20261130-040811.758161.boot.txt:
// boot).
func logCommand(path string) string {
	parts := strings.Split(filepath.Base(path), ".")
	if len(parts) < 2 {
		return filepath.Base(path)
	}
	return parts[len(parts)-2]
}

// Gaps: none. Even with --network=host (host TCP/IP, so flock's table
// applies) gVisor's kernel keeps UNIX sockets, abstract ones too, inside
// the sandbox, and flock-agent's filter forbids W+X to the agent's
// program (the Sentry's own W+X mappings are not the agent's).
func (gvisor) Gaps(Host) []Gap { return nil }
