package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// podman is level podman: the agent in a podman (crun) container.
type podman struct{}

func init() { Register(podman{}) }

func (podman) Level() Level { return Podman }

func (podman) Profile() Profile {
	return Profile{Rank: 10, Label: "sandboxed (podman)", Walls: ContainerWalls,
		Runtime:    Runtime{Name: "podman", Default: "/usr/bin/podman", Install: "apt-get install podman"},
		SignalExit: true}
}

func (podman) CheckRoot(rootfs, image string) (string, string) {
	if rootfs == "" && image == "" {
		return "level", "is podman, which needs a root file system: give rootfs: " + RootfsExample + " (a directory) or image: (podman's local store)"
	}
	return "", ""
}

// Launch becomes podman: it proxies SIGTERM to the agent and exits with
// it, so the unit sees the agent's exit. A rootfs's mount points are
// made first, as gVisor's are: crun would make the missing ones 0700,
// which a gVisor agent sharing the rootfs then cannot open.
func (podman) Launch(c Config, runtime, _ string) error {
	if c.Rootfs != "" {
		if err := EnsureMountPoints(c.Rootfs, c.MountPoints()); err != nil {
			return err
		}
	}
	argv := append([]string{"podman"}, PodmanArgs(c)...)
	fmt.Fprintln(os.Stderr, "flock-agent: sandbox:", runtime, strings.Join(argv[1:], " "))
	if err := syscall.Exec(runtime, argv, os.Environ()); err != nil {
		return fmt.Errorf("sandbox: exec %s: %w", runtime, err)
	}
	return nil
}

// PodmanArgs is the podman command line (without "podman") that runs c in
// the foreground: podman proxies SIGTERM to the agent and exits with it.
func PodmanArgs(c Config) []string {
	id := strconv.FormatUint(uint64(c.UID), 10) + ":" + strconv.FormatUint(uint64(c.GID), 10)
	args := []string{
		"run", "--rm", "--replace", "--name", c.Name(),
		// No cgroup of its own: the container stays in the unit's, which
		// sets the limits (and nspawn, where the tests run, has no
		// writable cgroup controllers at all).
		"--cgroups=disabled",
		// The host's network namespace: the container's sockets are the
		// agent uid's, which flock's table allows to the bus only.
		"--network=host", "--no-hosts", "--dns=none",
		"--user", id, "--passwd=false",
	}
	if c.SharedGID != 0 {
		args = append(args, "--group-add", strconv.FormatUint(uint64(c.SharedGID), 10))
	}
	args = append(args,
		"--read-only", "--read-only-tmpfs=true", // tmpfs /tmp, /var/tmp, /run
		"--cap-drop=all", "--security-opt=no-new-privileges",
		"--umask=0077",
		"--log-driver=none", // output goes to the unit's journal, not a second copy
		"--workdir", c.Cwd,
	)
	for _, m := range c.binds() {
		args = append(args, "--volume", m.Source+":"+m.Dest+":"+m.access())
	}
	for _, kv := range c.Env {
		args = append(args, "--env", kv)
	}
	if c.Rootfs != "" {
		args = append(args, "--rootfs", c.Rootfs)
	} else {
		args = append(args, "--pull=never", c.Image)
	}
	return append(args, c.Argv...)
}

// Gaps: podman runs the agent on the host's network namespace (so
// flock's uid-keyed table applies), and so shares its abstract sockets.
func (podman) Gaps(h Host) []Gap { return hostNetGaps(h) }
