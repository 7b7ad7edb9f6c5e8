package sandbox

// Tier: unit. The launcher's command line crosses the systemd boundary:
// what the unit writes (UnitArgs) is what flock-agent and the units read
// back (ReadUnitArgs).

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/agent"
)

func TestUnitArgsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		l     Launcher
		inner []string
	}{
		{Launcher{Level: Podman, Runtime: "/usr/bin/podman", UID: 2000000003, GID: 2000000003, SharedGID: 2000000000, Rootfs: "/var/lib/flock-rootfs/debian"}, []string{"task", "--", "/bin/tr", "a-z", "A-Z"}},
		{Launcher{Level: Podman, Runtime: "/usr/bin/podman", UID: 7, GID: 8, CommonRW: true, Image: "localhost/agent:1"}, nil},
		{Launcher{Level: GVisor, Runtime: "/usr/local/bin/runsc", UID: 1<<32 - 1, GID: 1, SharedGID: 2, Rootfs: "/r", Suffix: "-audit"}, []string{"exec", "--", "--level=process", "--"}},
		{Launcher{Level: GVisor, Runtime: "/usr/local/bin/runsc", UID: 9, GID: 9, Rootfs: "/r", Bundle: "/etc/flock/ca-bundle.crt"}, []string{"task", "--", "/bin/true"}},
		// Level process has no launcher: the unit runs inner itself.
		{Launcher{Level: Process}, []string{"task", "--", "/bin/true"}},
		{Launcher{Level: Process}, []string{"probe", `{"requests":[]}`}},
	} {
		args := tc.l.UnitArgs(tc.inner)
		l, inner, err := ReadUnitArgs(args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if l != tc.l || len(inner) != len(tc.inner) || (len(inner) > 0 && !reflect.DeepEqual(inner, tc.inner)) {
			t.Errorf("%q read back as %+v %q, want %+v %q", args, l, inner, tc.l, tc.inner)
		}
	}
}

// Every registered level reads back from its unit's command line as
// itself: one without a runtime has no launcher to name it, so only
// level process may be one.
func TestEveryLevelReadsBack(t *testing.T) {
	for _, lv := range Levels() {
		l := Launcher{Level: lv}
		if lv.Contained() {
			l.Runtime, l.Rootfs = "/usr/bin/"+lv.Profile().Runtime.Name, "/r"
		}
		back, _, err := ReadUnitArgs(l.UnitArgs([]string{"task", "--", "/bin/true"}))
		if err != nil || back.Level != lv {
			t.Errorf("level %s reads back as %q (%v)", lv, back.Level, err)
		}
	}
}

func TestReadUnitArgsNamesTheFlag(t *testing.T) {
	good := Launcher{Level: Podman, Runtime: "/usr/bin/podman", UID: 7, GID: 7, Rootfs: "/r"}.UnitArgs(nil)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another mode", []string{"task", "--", "x"}, "not the launcher's"},
		{"level process", replace(good, "--level=podman", "--level=process"), `--level="process": want podman or gvisor`},
		{"unknown level", replace(good, "--level=podman", "--level=vm"), `--level="vm"`},
		{"no runtime", replace(good, "--runtime=/usr/bin/podman", "--runtime="), "--runtime is missing"},
		{"common", replace(good, "--common=ro", "--common=yes"), `--common="yes"`},
		{"uid", replace(good, "--uid=7", "--uid=-1"), "-uid"},
		{"unknown flag", replace(good, "--uid=7", "--user=7"), "user"},
		{"relative bundle", append(slices.Clone(good[:len(good)-1]), "--bundle=ca.crt", "--"), `--bundle="ca.crt" is not an absolute path`},
	} {
		_, _, err := parseLauncher(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func replace(args []string, old, new string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == old {
			out[i] = new
		}
	}
	return out
}

// The container gets the unit's environment whole (agent.Env's one list),
// but for where the credential is inside.
func TestLauncherConfigPassesTheAgentEnvironment(t *testing.T) {
	env := agent.Env{ID: 3, Role: "worker", NATSURL: "nats://127.0.0.1:4222", NKeyFile: "/run/flock-agent/nats",
		InboxPrefix: "_INBOX.agent-3", SharedDir: "/srv/flock/common", LogFile: "/srv/flock/logs/3.log", Home: "/srv/flock/agents/3",
		// The spec's env and the proxy's reach the container with the rest.
		Extra: []string{"LOG_LEVEL=debug", "HTTPS_PROXY=http://127.0.0.1:4230"}}
	l := Launcher{Level: GVisor, Runtime: "/usr/local/bin/runsc", UID: 9, GID: 9, SharedGID: 8, CommonRW: true, Rootfs: "/var/lib/flock-rootfs/debian"}
	inside := env
	inside.NKeyFile = CredPath
	a := Agent{ID: env.ID, Home: env.Home, LogFile: env.LogFile, SharedDir: env.SharedDir, Cred: env.NKeyFile, Environ: inside.Environ()}
	c, err := l.Config(a, "/usr/local/bin/flock-agent", []string{"task", "--", "cat"})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"PATH=" + DefaultPath, "FLOCK_LEVEL=gvisor"}, inside.Environ()...)
	if !reflect.DeepEqual(c.Env, want) || !slices.Contains(c.Env, "LOG_LEVEL=debug") || !slices.Contains(c.Env, "HTTPS_PROXY=http://127.0.0.1:4230") {
		t.Errorf("env %q, want %q", c.Env, want)
	}
	if !c.Mounts[2].RW || c.Argv[0] != AgentPath || c.Cwd != env.Home || c.Cred != env.NKeyFile {
		t.Errorf("config %+v", c)
	}
	a.Home = ""
	if _, err := l.Config(a, "/x", nil); err == nil || !strings.Contains(err.Error(), "HOME") {
		t.Errorf("no home: %v", err)
	}
}

// The bundle of an agent granted secrets is bound read-only at its own
// path, where its variables point; others bind nothing more.
func TestLauncherConfigBindsTheBundle(t *testing.T) {
	a := Agent{ID: 3, Home: "/srv/flock/agents/3", LogFile: "/srv/flock/logs/3.log", SharedDir: "/srv/flock/common", Cred: "/run/flock-agent/nats"}
	for _, tc := range []struct {
		bundle string
		mounts int
	}{{"", 3}, {"/etc/flock/ca-bundle.crt", 4}} {
		l := Launcher{Level: Podman, Runtime: "/usr/bin/podman", UID: 9, GID: 9, Rootfs: "/r", Bundle: tc.bundle}
		c, err := l.Config(a, "/usr/local/bin/flock-agent", []string{"task", "--", "cat"})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Mounts) != tc.mounts {
			t.Fatalf("bundle %q: mounts %+v", tc.bundle, c.Mounts)
		}
		if m := c.Mounts[len(c.Mounts)-1]; tc.bundle != "" && (m != Mount{Source: tc.bundle, Dest: tc.bundle, File: true}) {
			t.Errorf("the bundle's mount %+v: want read-only, at its own path", m)
		}
	}
}
