package units

import (
	"strconv"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
)

// launcher is the command line of a contained agent's unit: flock-agent,
// running as root in it, starts the agent's container (suffix ends its
// name: Launcher.Suffix).
func launcher(f *spec.Flock, a spec.Agent, o Options, suffix string) sandbox.Launcher {
	uid := f.UID(a.ID)
	bundle := ""
	if a.HasSecrets() {
		bundle = spec.SecretsCABundlePath // where its variables point (secretEnv)
	}
	return sandbox.Launcher{
		Level: a.Level, Runtime: o.Runtimes.Path(a.Level),
		UID: uid, GID: uid, SharedGID: f.UIDBase, CommonRW: a.Common == spec.AccessRW,
		Rootfs: a.Rootfs, Image: a.Image, Suffix: suffix, Bundle: bundle,
	}
}

// containerHardening is the unit around a podman or gVisor container. The
// unit's main process is the runtime, which must be root to build the
// container (mounts, namespaces, the uid switch), so what the unit can
// keep is less than at level process; the container itself adds what the
// unit gives up (sandbox package: the agent's uid, no capabilities, a
// read-only root, its own mount, PID, IPC and UTS namespaces, a seccomp
// filter or gVisor's kernel). Given up, and why:
//
//   - User=, PrivateUsers=: the runtime needs root; the agent's uid is set
//     by the runtime instead.
//   - ProtectSystem=strict, ProtectHome=, TemporaryFileSystem=, BindPaths=:
//     the container's own root replaces the host's file system; the
//     runtimes write their state under /var/lib/containers and /run.
//   - RestrictNamespaces=, SystemCallFilter=, ProtectHostname=,
//     RestrictSUIDSGID=: building a container takes namespaces, mount,
//     pivot_root and sethostname, and these filters would bind the
//     runtime as well as the agent.
//   - CapabilityBoundingSet= (empty): the runtime needs the set below.
//   - MemoryDenyWriteExecute= where the runtime maps W+X itself (gVisor's
//     Sentry maps the code it runs).
//   - PrivateDevices=: podman binds /dev/null and the like from the
//     host's /dev, and gVisor emulates its own.
//
// Kept: NoNewPrivileges, ProtectKernel*, ProtectControlGroups, ProtectClock,
// PrivateTmp, PrivateIPC, ProtectProc, LockPersonality, RestrictRealtime,
// SystemCallArchitectures, RestrictAddressFamilies (plus AF_NETLINK),
// KeyringMode, and the limits, which bound the whole container.
func containerHardening(f *spec.Flock, a spec.Agent, p sandbox.Profile, suffix string) []Property {
	props := []Property{
		// runsc's bundle and state, the container's own (suffix: a
		// second container's); removed when the unit stops.
		{"RuntimeDirectory", []string{"flock-sandbox/" + strconv.Itoa(a.ID) + suffix}},
		{"RuntimeDirectoryMode", FileMode(0o700)},
		{"PrivateTmp", true},
		{"PrivateIPC", true},
		{"ProtectProc", "invisible"},
		{"NoNewPrivileges", true},
		{"CapabilityBoundingSet", containerCaps},
		{"AmbientCapabilities", uint64(0)},
		{"ProtectKernelTunables", true},
		{"ProtectKernelModules", true},
		{"ProtectKernelLogs", true},
		{"ProtectControlGroups", true},
		{"ProtectClock", true},
		{"LockPersonality", true},
		{"RestrictRealtime", true},
		{"KeyringMode", "private"},
		{"SystemCallArchitectures", []string{"native"}},
		{"RestrictAddressFamilies", NameList{true, []string{"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}}},
	}
	if !p.MapsWX {
		// Inherited by the container: its programs cannot map W+X either,
		// unless the agent runs a JIT (spec jit: true).
		props = append(props, Property{"MemoryDenyWriteExecute", !a.JIT})
	}
	return props
}

// containerCaps are what crun and runsc use to build a container as root:
// chown, dac_override, dac_read_search, fowner, fsetid, kill, setgid,
// setuid, setpcap, sys_chroot, sys_admin, sys_ptrace, sys_resource,
// audit_write, mknod, net_admin (runsc sets up the sandbox's loopback).
var containerCaps = capMask(0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 18, 19, 21, 24, 27, 29)

func capMask(caps ...uint) uint64 {
	var m uint64
	for _, c := range caps {
		m |= 1 << c
	}
	return m
}
