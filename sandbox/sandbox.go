// Package sandbox is flock's isolation levels: one Driver per level, in a
// file of its own (process.go, podman.go, gvisor.go), registered where the
// spec, the units, the preflight and the launcher look levels up.
//
// The contained levels run an agent in a container: podman (crun) or
// gVisor (runsc). flock-agent's launcher, started as root in the agent's
// unit, reads its Launcher from the unit's command line, turns it into a
// Config and hands that to the level's driver, which runs the podman
// command line or the OCI bundle runsc runs, so both levels keep the
// agent's identity and rules:
//
//   - the agent's uid: podman runs the process as it; gVisor maps the
//     sandbox's root to it, so the Sentry and gofer are that uid on the host;
//   - the host's network namespace, so flock's uid-keyed nftables table
//     applies to the agent's sockets as at level process (bus and egress
//     allowances only);
//   - the same directories (its own rw, its log, common per grant) at the
//     same paths, its bus credential, nothing else of the host;
//   - a read-only root, no capabilities, no new privileges, a seccomp
//     filter (podman's default, or gVisor's own kernel), and flock-agent's own
//     (agent.Walls), loaded before it execs the agent's program;
//   - the unit's cgroup: neither runtime makes a cgroup of its own, so the
//     unit's MemoryMax, CPUQuota and TasksMax bound the container.
package sandbox

import (
	"fmt"
	"path"
	"strconv"
)

// Inside the container, flock's own files are under Dir: the flock-agent
// binary (the host's, bound read-only) and the agent's bus credential.
const (
	Dir       = "/.flock"
	AgentPath = Dir + "/flock-agent"
	CredPath  = Dir + "/nats"
)

// RootfsExample is the root file system the messages suggest.
const RootfsExample = "/var/lib/flock-rootfs/debian"

// DefaultPath is PATH inside the container.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Mount is a host path bound at the same path inside the container.
type Mount struct {
	Source, Dest string
	RW           bool
	File         bool // a file, not a directory (its mount point is a file)
}

// access is the mount option of m: "rw" or "ro".
func (m Mount) access() string {
	if m.RW {
		return "rw"
	}
	return "ro"
}

// Config is one agent's container.
type Config struct {
	Level    Level // a contained level
	ID       int
	UID, GID uint32
	// SharedGID is the group of common/; podman adds it to the agent (in
	// gVisor the Sentry, the host-side agent, keeps no supplementary groups).
	SharedGID uint32
	Rootfs    string // a directory, or
	Image     string // podman's local store (podman only)
	AgentBin  string // the host's flock-agent, bound at AgentPath
	Cred      string // the agent's own bus credential, as the unit has it
	Mounts    []Mount
	Env       []string // KEY=VALUE, as the agent sees it
	Cwd       string
	Argv      []string // run inside: AgentPath and its mode
	Suffix    string   // ends Name: a second container of the agent (Launcher.Suffix)
}

// Name is the container's name (podman) or id (runsc).
func (c Config) Name() string { return "flock-agent-" + strconv.Itoa(c.ID) + c.Suffix }

// binds are every bind mount of the container, in mount order.
func (c Config) binds() []Mount {
	return append(append([]Mount(nil), c.Mounts...),
		Mount{Source: c.AgentBin, Dest: AgentPath, File: true},
		Mount{Source: c.Cred, Dest: CredPath, File: true})
}

// MountPoints are the paths runsc needs in the root file system before it
// starts: its gofer binds onto them from the host side, so they must
// exist (podman makes its own in the same way).
func (c Config) MountPoints() []Mount {
	var out []Mount
	for _, m := range c.binds() {
		out = append(out, Mount{Dest: m.Dest, File: m.File})
	}
	return out
}

// Validate reports what makes c unusable, naming the field.
func (c Config) Validate() error {
	d, ok := Lookup(c.Level)
	if !ok || !d.Profile().Contained() {
		return fmt.Errorf("level %q: want %s", c.Level, Or(Contained()))
	}
	if field, problem := d.CheckRoot(c.Rootfs, c.Image); problem != "" {
		return fmt.Errorf("%s %s", field, problem)
	}
	switch {
	case c.Rootfs != "" && !path.IsAbs(c.Rootfs):
		return fmt.Errorf("rootfs %q is not an absolute path", c.Rootfs)
	case c.UID == 0 || c.GID == 0:
		return fmt.Errorf("uid %d, gid %d: an agent never runs as root", c.UID, c.GID)
	case len(c.Argv) == 0:
		return fmt.Errorf("nothing to run")
	}
	return nil
}
