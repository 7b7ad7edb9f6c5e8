package sandbox

// Tier: unit. The podman command line and the runsc bundle, as a reviewer
// reads them, and the mount points made in a rootfs.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
)

func config(level Level) Config {
	return Config{
		Level: level, ID: 3, UID: 2000000003, GID: 2000000003, SharedGID: 2000000000, Rootfs: "/var/lib/flock-rootfs/debian",
		AgentBin: "/usr/local/bin/flock-agent", Cred: "/run/flock-sandbox/3/nats",
		Mounts: []Mount{
			{Source: "/srv/flock/agents/3", Dest: "/srv/flock/agents/3", RW: true},
			{Source: "/srv/flock/logs/3.log", Dest: "/srv/flock/logs/3.log", RW: true, File: true},
			{Source: "/srv/flock/common", Dest: "/srv/flock/common"},
		},
		Env:  []string{"PATH=" + DefaultPath, "AGENT_ID=3", "NATS_NKEY=" + CredPath},
		Cwd:  "/srv/flock/agents/3",
		Argv: []string{AgentPath, "task", "--", "/bin/tr", "a-z", "A-Z"},
	}
}

func TestPodmanArgsGolden(t *testing.T) {
	golden.Check(t, filepath.Join("testdata", "podman.golden"), strings.Join(PodmanArgs(config(Podman)), "\n")+"\n")
}

func TestOCISpecGolden(t *testing.T) {
	c := config(GVisor)
	b, err := json.MarshalIndent(OCISpec(c), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "gvisor-config.json.golden"), string(b)+"\n"+strings.Join(RunscArgs(c, "/run/flock-sandbox/3/runsc", "/run/flock-sandbox/3/bundle"), " ")+"\n")
}

func TestValidateNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"root", func(c *Config) { c.UID = 0 }, "never runs as root"},
		{"gvisor image", func(c *Config) { c.Rootfs, c.Image = "", "localhost/a" }, "image cannot be used with level gvisor"},
		{"relative", func(c *Config) { c.Rootfs = "rootfs" }, "not an absolute path"},
		{"level", func(c *Config) { c.Level = Process }, "want podman or gvisor"},
	} {
		c := config(GVisor)
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := config(GVisor).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestMountPointsAreMadeNeverThroughSymlinks(t *testing.T) {
	root := t.TempDir()
	c := config(GVisor)
	if err := EnsureMountPoints(root, c.MountPoints()); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.MountPoints() {
		fi, err := os.Stat(filepath.Join(root, m.Dest))
		if err != nil || fi.IsDir() == m.File {
			t.Errorf("%s: %v, dir %v", m.Dest, err, fi != nil && fi.IsDir())
		}
	}
	// Again: nothing to do, no error.
	if err := EnsureMountPoints(root, c.MountPoints()); err != nil {
		t.Fatal(err)
	}
	evil := t.TempDir()
	root2 := t.TempDir()
	if err := os.Symlink(evil, filepath.Join(root2, "srv")); err != nil {
		t.Fatal(err)
	}
	err := EnsureMountPoints(root2, c.MountPoints())
	if err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("through a symlink: %v", err)
	}
	if entries, _ := os.ReadDir(evil); len(entries) != 0 {
		t.Errorf("created %v behind the symlink", entries)
	}
}

// Tier: unit. The walls each level cannot close: abstract sockets at the
// levels on the host's network namespace, on a kernel without Landlock
// scopes only; none at gvisor.
func TestGaps(t *testing.T) {
	for _, tc := range []struct {
		level  Level
		scopes bool
		want   []string
	}{
		{Process, false, []string{"abstract UNIX sockets"}},
		{Process, true, nil},
		{Podman, false, []string{"abstract UNIX sockets"}},
		{Podman, true, nil},
		{GVisor, false, nil},
		{GVisor, true, nil},
	} {
		d, _ := Lookup(tc.level)
		var got []string
		for _, g := range d.Gaps(Host{IPCScopes: tc.scopes}) {
			if g.Why == "" {
				t.Errorf("%s: gap %q has no reason", tc.level, g.Wall)
			}
			got = append(got, g.Wall)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s, scopes %v: gaps %q, want %q", tc.level, tc.scopes, got, tc.want)
		}
	}
}
