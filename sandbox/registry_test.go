package sandbox_test

// Tier: unit. A level is one file: a driver registered here, and nowhere
// else, is a level the spec accepts, the units run through its runtime,
// the preflight checks, the audit plans for and the launcher hands its
// container to.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/audit"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// testbox is a fourth level, as a new level's file would write it.
type testbox struct{ launched chan sandbox.Config }

const testboxLevel sandbox.Level = "testbox"

func (testbox) Level() sandbox.Level            { return testboxLevel }
func (testbox) Gaps(sandbox.Host) []sandbox.Gap { return nil }
func (testbox) Profile() sandbox.Profile {
	return sandbox.Profile{Rank: 30, Label: "sandboxed (testbox)", Walls: sandbox.ContainerWalls,
		Runtime: sandbox.Runtime{Name: "testbox-run", Default: "/nonexistent/testbox-run", Install: "build testbox-run"},
		MapsWX:  true, OwnKernel: true}
}
func (testbox) CheckRoot(rootfs, image string) (string, string) {
	if rootfs == "" {
		return "level", "is testbox, which needs rootfs"
	}
	return "", ""
}
func (d testbox) Launch(c sandbox.Config, runtime, run string) error {
	d.launched <- c
	return nil
}

func TestANewLevelRegistersEverywhere(t *testing.T) {
	box := testbox{launched: make(chan sandbox.Config, 1)}
	sandbox.Register(box)

	// The spec: accepted with what its driver asks, refused with its words.
	rootfs, err := os.MkdirTemp("/var/tmp", "flock-testbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rootfs) })
	if _, err := spec.Parse([]byte("agents: [{id: 1, level: testbox}]")); err == nil || !strings.Contains(err.Error(), "agents[0].level: is testbox, which needs rootfs") {
		t.Errorf("testbox without rootfs: %v", err)
	}
	if _, err := spec.Parse([]byte("agents: [{id: 1, level: vm}]")); err == nil || !strings.Contains(err.Error(), "choose process, podman, gvisor or testbox") {
		t.Errorf("the levels offered: %v", err)
	}
	f, err := spec.Parse([]byte("agents: [{id: 1, level: testbox, rootfs: " + rootfs + "}]"))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Agents[0]

	// The unit: the launcher with the level's runtime, the contained
	// hardening, no W+X wall (its runtime maps W+X).
	runtime := filepath.Join(t.TempDir(), "testbox-run")
	rt := sandbox.Runtimes{testboxLevel: runtime}
	u := units.ForAgent(f, a, units.Options{Runtimes: rt})
	r := units.Render(u)
	for _, want := range []string{"--level=testbox", "--runtime=" + runtime, "sandboxed (testbox)", "CapabilityBoundingSet="} {
		if !strings.Contains(r, want) {
			t.Errorf("unit lacks %q:\n%s", want, r)
		}
	}
	// Contained: the launcher runs as root, and the runtime maps W+X.
	for _, not := range []string{"\nUser=", "MemoryDenyWriteExecute"} {
		if strings.Contains(r, not) {
			t.Errorf("unit has %q:\n%s", not, r)
		}
	}

	// The preflight: its runtime is required and named with its fix.
	if err := rt.Ready(a.Level, a.Rootfs); err == nil || !strings.Contains(err.Error(), "needs "+runtime+", which is not installed: build testbox-run") {
		t.Errorf("runtime missing: %v", err)
	}
	if err := os.WriteFile(runtime, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rt.Ready(a.Level, a.Rootfs); err != nil {
		t.Errorf("runtime there: %v", err)
	}

	// The audit: a kernel of the runtime's own answers a user namespace,
	// so no probe of the host's is planned.
	for _, p := range audit.Plan(f, a, audit.Target{}, audit.Colluder{}) {
		if p.Req.Op == "userns" {
			t.Errorf("audit plans %q for a level with its own kernel", p.Name)
		}
	}

	// The launcher: the unit's command line reads back, and Launch hands
	// the container to the driver.
	argv, err := agent.ParseUnitArgs(prop[[]units.ExecCommand](t, u, "ExecStart")[0].Argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	l, inner, err := sandbox.ReadUnitArgs(argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	if l.Level != testboxLevel || l.Runtime != runtime || l.Rootfs != rootfs {
		t.Errorf("launcher %+v", l)
	}
	setUnitEnv(t, u)
	env, err := agent.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	a2 := sandbox.Agent{ID: env.ID, Home: env.Home, LogFile: env.LogFile, SharedDir: env.SharedDir, Cred: env.NKeyFile, Environ: env.Environ()}
	if err := sandbox.Launch(l, a2, inner); err != nil {
		t.Fatal(err)
	}
	c := <-box.launched
	if c.Level != testboxLevel || c.Rootfs != rootfs || c.Argv[0] != sandbox.AgentPath {
		t.Errorf("driver got %+v", c)
	}
}

// setUnitEnv is the environment systemd gives the unit u: its
// Environment= and a runtime directory.
func setUnitEnv(t *testing.T, u units.Unit) {
	for _, kv := range prop[[]string](t, u, "Environment") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("RUNTIME_DIRECTORY", t.TempDir())
}

// prop is u's property name, of type T.
func prop[T any](t *testing.T, u units.Unit, name string) T {
	t.Helper()
	for _, p := range u.Properties {
		if p.Name == name {
			if v, ok := p.Value.(T); ok {
				return v
			}
			t.Fatalf("%s is %T", name, p.Value)
		}
	}
	t.Fatalf("no %s in %s", name, u.Name)
	var zero T
	return zero
}
