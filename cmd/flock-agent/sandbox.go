package main

// flock-agent sandbox: the launcher of levels podman and gvisor. systemd
// starts it as root in the agent's unit; it hands the agent's credential
// to the agent's uid, prepares the container and becomes (podman) or
// watches (runsc) the runtime that runs flock-agent inside.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
)

func runSandbox(args []string) error {
	fs := flag.NewFlagSet("flock-agent sandbox", flag.ContinueOnError)
	level := fs.String("level", "", "podman or gvisor")
	uid := fs.Uint("uid", 0, "the agent's uid")
	gid := fs.Uint("gid", 0, "the agent's gid")
	shared := fs.Uint("shared-gid", 0, "the group of common/ (podman adds it to the agent; gVisor's sandbox runs with it)")
	common := fs.String("common", "ro", "access to common/: ro or rw")
	rootfs := fs.String("rootfs", "", "the root file system, a directory")
	image := fs.String("image", "", "the root file system, an image in podman's local store")
	runtime := fs.String("runtime", "", "the path of podman or runsc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := sandboxConfig(spec.Level(*level), uint32(*uid), uint32(*gid), *common, *rootfs, *image, fs.Args())
	if err != nil {
		return err
	}
	if *runtime == "" {
		return errors.New("sandbox: --runtime is missing (the path of podman or runsc)")
	}
	run := os.Getenv("RUNTIME_DIRECTORY")
	if run == "" {
		return errors.New("sandbox: RUNTIME_DIRECTORY is not set; run me from the agent's unit (RuntimeDirectory=)")
	}
	c.Cred = filepath.Join(run, "nats")
	c.SharedGID = uint32(*shared)
	if err := handCredential(c.Cred, c.UID, c.GID); err != nil {
		return err
	}
	if c.Level == spec.LevelPodman {
		argv := append([]string{"podman"}, sandbox.PodmanArgs(c)...)
		fmt.Fprintln(os.Stderr, "flock-agent: sandbox:", *runtime, strings.Join(argv[1:], " "))
		return execve(*runtime, argv, os.Environ())
	}
	return runGVisor(c, *runtime, run)
}

// sandboxConfig reads the container of this unit from the launcher's
// flags and the unit's environment.
func sandboxConfig(level spec.Level, uid, gid uint32, common, rootfs, image string, inner []string) (sandbox.Config, error) {
	self, err := os.Executable()
	if err != nil {
		return sandbox.Config{}, err
	}
	// The unit's environment, read as every flock-agent mode reads it and
	// passed on whole, but for where the credential is inside.
	ae, err := agent.FromEnv()
	if err != nil {
		return sandbox.Config{}, fmt.Errorf("sandbox: %w", err)
	}
	inside := ae
	inside.NKeyFile = sandbox.CredPath
	env := append([]string{"PATH=" + sandbox.DefaultPath, "FLOCK_LEVEL=" + string(level)}, inside.Environ()...)
	home, logFile, sharedDir := ae.Home, ae.LogFile, ae.SharedDir
	if home == "" || logFile == "" || sharedDir == "" {
		return sandbox.Config{}, errors.New("sandbox: HOME, FLOCK_LOG_FILE and SHARED_DIR must be set; run me from the agent's unit")
	}
	c := sandbox.Config{
		Level: level, ID: ae.ID, UID: uid, GID: gid, Rootfs: rootfs, Image: image,
		AgentBin: self, Env: env, Cwd: home,
		Mounts: []sandbox.Mount{
			{Source: home, Dest: home, RW: true},
			{Source: logFile, Dest: logFile, RW: true, File: true},
			{Source: sharedDir, Dest: sharedDir, RW: common == "rw"},
		},
		Argv: append([]string{sandbox.AgentPath}, inner...),
	}
	return c, c.Validate()
}

// handCredential copies the credential systemd loaded for the unit (root's,
// 0400) to dst, owned by the agent: the container runs as the agent's uid.
func handCredential(dst string, uid, gid uint32) error {
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return errors.New("sandbox: CREDENTIALS_DIRECTORY is not set; the unit must load the bus credential (LoadCredential=nats:...)")
	}
	seed, err := os.ReadFile(filepath.Join(dir, "nats"))
	if err != nil {
		return fmt.Errorf("sandbox: the bus credential: %w", err)
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	_, err = f.Write(seed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chown(tmp, int(uid), int(gid))
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return fmt.Errorf("sandbox: hand the credential to uid %d: %w", uid, err)
	}
	return nil
}

// runGVisor writes the bundle, makes the rootfs's mount points, and runs
// runsc, passing SIGTERM on to the agent: runsc run does not forward
// signals to a container without a terminal.
func runGVisor(c sandbox.Config, runsc, run string) error {
	if err := sandbox.EnsureMountPoints(c.Rootfs, c.MountPoints()); err != nil {
		return err
	}
	bundle := filepath.Join(run, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sandbox.OCISpec(c), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return err
	}
	root := filepath.Join(run, "runsc")
	args := sandbox.RunscArgs(c, root, bundle)
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
		os.Exit(exit.ExitCode())
	}
	return err
}
