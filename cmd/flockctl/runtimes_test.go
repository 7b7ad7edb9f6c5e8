package main

// Tier: unit. provision refuses an agent whose level cannot run here,
// before it changes anything, and says what to install or fix.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
)

func TestRuntimesForNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "runtime")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not under /tmp, which the spec refuses as a system directory.
	rootfs, err := os.MkdirTemp("/var/tmp", "flock-rootfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rootfs) })
	missing := filepath.Join(dir, "absent")
	missingRootfs := rootfs + "-absent"
	for _, tc := range []struct {
		name, yaml string
		rt         sandbox.Runtimes
		want       string
	}{
		{"process needs nothing", "agents: [{id: 1}]", sandbox.Runtimes{sandbox.Podman: missing, sandbox.GVisor: missing}, ""},
		{"podman there", "agents: [{id: 1, level: podman, rootfs: " + rootfs + "}]", sandbox.Runtimes{sandbox.Podman: exe, sandbox.GVisor: missing}, ""},
		{"no podman", "agents: [{id: 1, level: podman, image: localhost/a}]", sandbox.Runtimes{sandbox.Podman: missing, sandbox.GVisor: exe}, "agent 1: level podman needs " + missing + ", which is not installed: apt-get install podman"},
		{"no runsc", "agents: [{id: 2, level: gvisor, rootfs: " + rootfs + "}]", sandbox.Runtimes{sandbox.Podman: exe, sandbox.GVisor: missing}, "agent 2: level gvisor needs " + missing + ", which is not installed: make runsc"},
		{"no rootfs", "agents: [{id: 3, level: gvisor, rootfs: " + missingRootfs + "}]", sandbox.Runtimes{sandbox.Podman: exe, sandbox.GVisor: exe}, "agent 3: rootfs " + missingRootfs + " is not a directory on this host"},
	} {
		f, err := spec.Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = runtimesFor(f.Agents, tc.rt)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
