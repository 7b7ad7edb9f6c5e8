package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
)

// LauncherMode is flock-agent's first argument when it is the launcher.
const LauncherMode = "sandbox"

// Launcher is the launcher's command line: what the unit of a contained
// agent tells flock-agent, running as root in it, about the container to
// build. UnitArgs writes it and ReadUnitArgs reads it, for the units and
// flock-agent alike, so the sides of the systemd boundary cannot
// disagree on an agent's level.
type Launcher struct {
	Level     Level
	Runtime   string // the runtime's path on this host
	UID, GID  uint32 // the agent's
	SharedGID uint32 // the group of common/ (podman adds it to the agent; gVisor's sandbox runs with it)
	CommonRW  bool   // common/ is writable for the agent
	Rootfs    string // the root file system: a directory, or
	Image     string // an image in podman's local store
	// Suffix tells a second container of the agent (flockctl audit's)
	// from its own: it ends the container's name. "" for the agent's.
	Suffix string
	// Bundle is a file bound read-only at its own path: the roots an
	// agent granted secrets trusts (spec.SecretsCABundlePath), where its
	// variables point. "" for none.
	Bundle string
}

// UnitArgs is flock-agent's command line after its name in the unit of
// an agent at l.Level: inner itself where the unit runs the agent (level
// process), the launcher's around it where a runtime does.
func (l Launcher) UnitArgs(inner []string) []string {
	if !l.Level.Contained() {
		return inner
	}
	return l.args(inner)
}

// ReadUnitArgs reads what UnitArgs wrote: the launcher (of level process,
// and nothing else, where there is none) and inner.
func ReadUnitArgs(args []string) (Launcher, []string, error) {
	if len(args) == 0 || args[0] != LauncherMode {
		return Launcher{Level: Process}, args, nil
	}
	return parseLauncher(args)
}

// args is the launcher's command line: the mode, the flags, then "--"
// and inner, the flock-agent arguments run inside.
func (l Launcher) args(inner []string) []string {
	common := "ro"
	if l.CommonRW {
		common = "rw"
	}
	args := []string{LauncherMode, "--level=" + string(l.Level), "--runtime=" + l.Runtime,
		"--uid=" + u32(l.UID), "--gid=" + u32(l.GID), "--shared-gid=" + u32(l.SharedGID),
		"--common=" + common}
	if l.Rootfs != "" {
		args = append(args, "--rootfs="+l.Rootfs)
	} else {
		args = append(args, "--image="+l.Image)
	}
	if l.Suffix != "" {
		args = append(args, "--suffix="+l.Suffix)
	}
	if l.Bundle != "" {
		args = append(args, "--bundle="+l.Bundle)
	}
	return append(append(args, "--"), inner...)
}

func u32(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// parseLauncher reads what args wrote: the launcher and the inner
// arguments. It checks what it reads, naming the flag.
func parseLauncher(args []string) (Launcher, []string, error) {
	var l Launcher
	if len(args) == 0 || args[0] != LauncherMode {
		return l, nil, fmt.Errorf("sandbox: not the launcher's command line (want %q first): %q", LauncherMode, args)
	}
	fs := flag.NewFlagSet("flock-agent "+LauncherMode, flag.ContinueOnError)
	level := fs.String("level", "", "the isolation level: "+Or(Contained()))
	fs.StringVar(&l.Runtime, "runtime", "", "the path of the level's runtime")
	uid := fs.Uint("uid", 0, "the agent's uid")
	gid := fs.Uint("gid", 0, "the agent's gid")
	shared := fs.Uint("shared-gid", 0, "the group of common/")
	common := fs.String("common", "ro", "access to common/: ro or rw")
	fs.StringVar(&l.Rootfs, "rootfs", "", "the root file system, a directory")
	fs.StringVar(&l.Image, "image", "", "the root file system, an image in podman's local store")
	fs.StringVar(&l.Suffix, "suffix", "", "ends the container's name (a second container of the agent)")
	fs.StringVar(&l.Bundle, "bundle", "", "a file of trusted roots, bound read-only at its own path")
	if err := fs.Parse(args[1:]); err != nil {
		return l, nil, err
	}
	l.Level = Level(*level)
	switch {
	case !l.Level.Contained():
		return l, nil, fmt.Errorf("sandbox: --level=%q: want %s", *level, Or(Contained()))
	case l.Runtime == "":
		return l, nil, errors.New("sandbox: --runtime is missing (the path of the level's runtime)")
	case *common != "ro" && *common != "rw":
		return l, nil, fmt.Errorf("sandbox: --common=%q: want ro or rw", *common)
	case *uid > 1<<32-1 || *gid > 1<<32-1 || *shared > 1<<32-1:
		return l, nil, fmt.Errorf("sandbox: --uid, --gid and --shared-gid are 32-bit ids")
	case l.Bundle != "" && !path.IsAbs(l.Bundle):
		return l, nil, fmt.Errorf("sandbox: --bundle=%q is not an absolute path", l.Bundle)
	}
	l.UID, l.GID, l.SharedGID, l.CommonRW = uint32(*uid), uint32(*gid), uint32(*shared), *common == "rw"
	return l, fs.Args(), nil
}

// Agent is what the launcher knows of the unit's agent: where its files
// are (Cred: its bus credential, its own, which the unit binds in), and
// its environment as the container gets it (the unit's, read by
// agent.FromEnv and written back by Env.Environ, but for where the
// credential is inside: CredPath).
type Agent struct {
	ID                             int
	Home, LogFile, SharedDir, Cred string
	Environ                        []string
}

// Launch is the launcher: the level's driver runs flock-agent inner inside
// the container.
func Launch(l Launcher, a Agent, inner []string) error {
	d, ok := Lookup(l.Level)
	if !ok {
		return fmt.Errorf("sandbox: level %q is not known", l.Level)
	}
	run := os.Getenv("RUNTIME_DIRECTORY")
	if run == "" {
		return errors.New("sandbox: RUNTIME_DIRECTORY is not set; run me from the agent's unit (RuntimeDirectory=)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := l.Config(a, self, inner)
	if err != nil {
		return err
	}
	return d.Launch(c, l.Runtime, run)
}

// Config is the container of agent a: flock-agent (self, bound in) runs
// inner inside.
func (l Launcher) Config(a Agent, self string, inner []string) (Config, error) {
	if a.Home == "" || a.LogFile == "" || a.SharedDir == "" || a.Cred == "" {
		return Config{}, errors.New("sandbox: HOME, FLOCK_LOG_FILE, SHARED_DIR and NATS_NKEY must be set; run me from the agent's unit")
	}
	c := Config{
		Level: l.Level, ID: a.ID, UID: l.UID, GID: l.GID, SharedGID: l.SharedGID,
		Rootfs: l.Rootfs, Image: l.Image, AgentBin: self, Cred: a.Cred, Suffix: l.Suffix,
		Env: append([]string{"PATH=" + DefaultPath, "FLOCK_LEVEL=" + string(l.Level)}, a.Environ...),
		Cwd: a.Home,
		Mounts: []Mount{
			{Source: a.Home, Dest: a.Home, RW: true},
			{Source: a.LogFile, Dest: a.LogFile, RW: true, File: true},
			{Source: a.SharedDir, Dest: a.SharedDir, RW: l.CommonRW},
		},
		Argv: append([]string{AgentPath}, inner...),
	}
	if l.Bundle != "" {
		c.Mounts = append(c.Mounts, Mount{Source: l.Bundle, Dest: l.Bundle, File: true})
	}
	return c, c.Validate()
}
