package sandbox

// Tier: unit. The podman command line and the runsc bundle, as a reviewer
// reads them, and the mount points made in a rootfs.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
	golden.Check(t, filepath.Join("testdata", "gvisor-config.json.golden"), string(b)+"\n"+strings.Join(RunscArgs(c, "/run/flock-sandbox/3"), " ")+"\n")
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

// Tier: unit. A mount point has its mode from the moment it is made,
// whatever the launcher's umask (a unit's is 077): another agent's
// launcher sharing the rootfs may find it before the chmod, and gVisor's
// gofer, walking as the agent, must be able to open it. An empty file of
// root's that others cannot read (crun makes its mount points 0700) is
// made readable; a file with content is the operator's and is left.
func TestMountPointsAreReadableFromTheMomentTheyAreMade(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	defer func(f func(string)) { madeMountPoint = f }(madeMountPoint)
	seen := map[string]os.FileMode{}
	madeMountPoint = func(p string) {
		if fi, err := os.Lstat(p); err == nil {
			seen[p] = fi.Mode().Perm()
		}
	}
	root := t.TempDir()
	c := config(GVisor)
	if err := EnsureMountPoints(root, c.MountPoints()); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("no mount point was made")
	}
	for p, mode := range seen {
		if fi, _ := os.Lstat(p); (fi.IsDir() && mode != 0o755) || (!fi.IsDir() && mode != 0o644) {
			t.Errorf("%s was %o when made, before its chmod", p, mode)
		}
	}
	if got := syscall.Umask(0o077); got != 0o077 {
		t.Errorf("the umask after: %o, want the caller's 077 back", got)
	}

	if os.Getuid() != 0 {
		t.Skip("the repair of root's mount points needs root (the unit tier runs as root in CI)")
	}
	var file, kept string
	for _, m := range c.MountPoints() {
		if m.File {
			file = filepath.Join(root, m.Dest)
		}
	}
	kept = filepath.Join(t.TempDir(), "kept")
	if err := os.WriteFile(kept, []byte("the operator's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := EnsureMountPoints(root, c.MountPoints()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(file); fi.Mode().Perm() != 0o644 {
		t.Errorf("a 0700 empty mount point of root's is %o after, want 0644", fi.Mode().Perm())
	}
	if err := EnsureMountPoints(filepath.Dir(kept), []Mount{{Dest: "/kept", File: true}}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(kept); fi.Mode().Perm() != 0o600 {
		t.Errorf("a file with content at a mount point is %o after, want the operator's 0600", fi.Mode().Perm())
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

// A sandbox that dies while booting logs why only to its processes' logs
// (and runsc its own line to runsc's): the journal gets their warnings,
// errors and crashes, the last 30, each naming its log, and not their
// info.
func TestShowRunscLog(t *testing.T) {
	run := t.TempDir()
	var b strings.Builder
	b.WriteString("I1129 09:53:19.000001       1 main.go:1] ***************************\n")
	for i := range 31 {
		fmt.Fprintf(&b, "W1129 09:53:19.%06d       1 boot.go:1] warning %d\n", i, i)
	}
	b.WriteString("D1129 09:53:19.100000       1 boot.go:2] debug\n")
	b.WriteString("[09:53:19.466254]	     +95µs             	├─ memory file created: 95µs\n")
	b.WriteString("Where a word starts with E: not a log line\n")
	b.WriteString("E1129 09:53:19.200000       1 boot.go:3] creating loader: cannot create kernel\n")
	b.WriteString("fatal error: runtime: cannot allocate memory\n")
	if err := os.MkdirAll(RunscLogs(run), 0o700); err != nil {
		t.Fatal(err)
	}
	boot := filepath.Join(RunscLogs(run), "runsc.log.20261129-095319.000001.boot.txt")
	gofer := filepath.Join(RunscLogs(run), "runsc.log.20261129-095319.000001.gofer.txt")
	for path, text := range map[string]string{
		RunscLog(run): "",
		gofer:         "W1129 09:53:19.000000       1 config.go:563] --allow-suid is disabled\n",
		boot:          b.String(),
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	showRunscLog(&out, run)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 30 {
		t.Fatalf("%d lines, want the last 30 warnings and errors:\n%s", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "flock-agent: runsc boot log: W1129") || !strings.HasSuffix(lines[0], "warning 3") {
		t.Errorf("first line %q, want boot's warning 3 (the last 30 of 34)", lines[0])
	}
	if !strings.HasSuffix(lines[28], "cannot create kernel") || lines[29] != "flock-agent: runsc boot log: fatal error: runtime: cannot allocate memory" {
		t.Errorf("last lines %q, want the error and the crash", lines[28:])
	}
	if strings.Contains(out.String(), "debug") || strings.Contains(out.String(), "****") || strings.Contains(out.String(), "memory file") || strings.Contains(out.String(), "Where") {
		t.Errorf("info, debug or other lines shown:\n%s", out.String())
	}

	out.Reset()
	showRunscLog(&out, filepath.Join(run, "missing"))
	if !strings.Contains(out.String(), "no runsc log") {
		t.Errorf("a missing log: %q, want it said", out.String())
	}
	os.Remove(boot)
	out.Reset()
	showRunscLog(&out, run)
	if !strings.Contains(out.String(), "flock-agent: runsc gofer log: W1129") {
		t.Errorf("the gofer's warning: %q, want it shown", out.String())
	}
}
