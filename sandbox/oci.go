package sandbox

import (
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// OCISpec is the bundle's config.json for runsc.
func OCISpec(c Config) *specs.Spec {
	umask := uint32(0o077)
	// The Sentry and gofer do the host's file work with one uid and one
	// gid and no supplementary groups, so the sandbox's gid is the shared
	// group (common/ is root:flock 2770): the agent's own directory and
	// log are its uid's, common/ is the group's.
	gid := c.GID
	if c.SharedGID != 0 {
		gid = c.SharedGID
	}
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			// Root of gVisor's own kernel, which the user namespace below
			// maps to the agent's uid on the host; with no capabilities it
			// can do no more than that uid.
			User: specs.User{UID: 0, GID: 0, Umask: &umask},
			Args: c.Argv,
			Env:  c.Env,
			Cwd:  c.Cwd,
			// Empty sets: no capabilities at all.
			Capabilities: &specs.LinuxCapabilities{
				Bounding: []string{}, Effective: []string{}, Inheritable: []string{},
				Permitted: []string{}, Ambient: []string{},
			},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: c.Rootfs, Readonly: true},
		Hostname: c.Name(),
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.UserNamespace},
				// No network namespace: runsc --network=host uses the host's,
				// where the agent uid's sockets meet flock's table.
			},
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: c.UID, Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: gid, Size: 1}},
		},
	}
	for _, m := range c.binds() {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.Dest, Type: "bind", Source: m.Source,
			Options: []string{"rbind", m.access(), "nosuid", "nodev"}})
	}
	return s
}

// RunscArgs is the runsc command line (without "runsc") that runs c from
// run, the unit's runtime directory: its bundle in run/bundle, its state
// under run/runsc, runsc's own log in RunscLog(run), and a log per
// process of the sandbox (run, gofer, boot) in RunscLogs(run). Only those
// say why a sandbox died while it booted: --log alone stays empty then.
// At info level they are a few tens of KiB per start, in the unit's
// runtime directory, gone at its stop.
func RunscArgs(c Config, run string) []string {
	return []string{
		"--root", runscRoot(run),
		"--log", RunscLog(run),
		"--debug-log", RunscLogs(run) + "/",
		// The sandbox stays in the unit's cgroup, which sets the limits.
		"--ignore-cgroups",
		"--network=host",
		// No overlay: the root file system stays read-only, as asked.
		"--overlay2=none",
		"run", "--bundle", filepath.Join(run, "bundle"), c.Name(),
	}
}

// runscRoot is runsc's state directory (--root), in the run directory.
func runscRoot(run string) string { return filepath.Join(run, "runsc") }

// RunscLog is where runsc logs, in the run directory.
func RunscLog(run string) string { return filepath.Join(run, "runsc.log") }

// RunscLogs is the directory of the sandbox's processes' logs, a file
// per process (runsc.log.TIME.COMMAND.txt), in the run directory.
func RunscLogs(run string) string { return filepath.Join(run, "logs") }
