package test

// The Ansible role's own decisions, made on the controller: ansible-lint's
// verdict, which package it picks, what the spec's levels make it install,
// and its declared variables against its defaults (tier: tools, or unit).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/test/harness"
)

// TestAnsibleLint runs ansible-lint on ansible/, offline (no Galaxy, no
// schema refresh), with the strictest profile this version knows; any
// finding fails.
//
// Tier: tools (ansible-lint; skipped without it, failed in CI).
func TestAnsibleLint(t *testing.T) {
	lint := harness.AnsibleTier.Tool(t, "ansible-lint")
	env := harness.AnsibleEnv(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{lint, "--offline", "--nocolor", "-p"}
	// Profiles came with ansible-lint 6.6; an older one lints with its default rules.
	if help, _ := exec.CommandContext(ctx, lint, "--help").CombinedOutput(); strings.Contains(string(help), "--profile") {
		args = append(args, "--profile", "production")
	}
	out, err := harness.RunInRepo(ctx, env, append(args, "ansible/")...)
	if err != nil {
		t.Fatalf("ansible-lint finds something in ansible/: %v\n%s", err, out)
	}
	// A rule that only warns exits 0: its finding fails the test too.
	if m := lintSummary.FindStringSubmatch(out); m == nil || m[1] != "0" || m[2] != "0" || lintFinding.MatchString(out) {
		t.Errorf("ansible-lint: want no failure and no warning:\n%s", out)
	}
}

var (
	lintSummary = regexp.MustCompile(`(\d+) failure\(s\), (\d+) warning\(s\)`)
	lintFinding = regexp.MustCompile(`(?m)^ansible/\S+:\d+`)
)

// TestAnsibleDebChoice: flock_deb's default is the newest package of the
// host's architecture in Debian's version order, from bin/ and
// bin/release/, as the role evaluates it on the controller.
//
// Tier: tools (ansible-core; skipped without it, failed in CI).
func TestAnsibleDebChoice(t *testing.T) {
	ansible := harness.AnsibleTier.Tool(t, "ansible")
	for _, tc := range []struct {
		name, arch string
		files      []string // under the repository's root
		want       string   // "" none
	}{
		{"0.10.0 is newer than 0.9.0, a release newer than its candidate", "amd64",
			[]string{"bin/flock_0.9.0_amd64.deb", "bin/flock_0.10.0_amd64.deb", "bin/flock_0.2.0~rc1_amd64.deb", "bin/flock_0.2.0_amd64.deb"},
			"bin/flock_0.10.0_amd64.deb"},
		{"a release candidate is older than its release", "amd64",
			[]string{"bin/flock_0.2.0_amd64.deb", "bin/flock_0.2.0~rc1_amd64.deb"},
			"bin/flock_0.2.0_amd64.deb"},
		{"a build after a tag is newer than the tag, one before it older", "amd64",
			[]string{"bin/flock_0.1.0~git20260101000000.abc_amd64.deb", "bin/flock_0.1.0+git20260102000000.def_amd64.deb", "bin/flock_0.1.0_amd64.deb"},
			"bin/flock_0.1.0+git20260102000000.def_amd64.deb"},
		{"the host's architecture only, from bin/release too", "arm64",
			[]string{"bin/flock_0.3.0_amd64.deb", "bin/flock_0.1.0_arm64.deb", "bin/release/flock_0.2.0_arm64.deb", "bin/release/flock_0.3.0_amd64.deb"},
			"bin/release/flock_0.2.0_arm64.deb"},
		{"none of the host's architecture", "arm64",
			[]string{"bin/flock_0.3.0_amd64.deb", "bin/flock-0.4.0_arm64.deb", "bin/other_0.5.0_arm64.deb"},
			""},
		{"no bin/ at all", "amd64", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range append(tc.files, "ansible/site.yml") {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var got string
			roleEval(t, ansible, filepath.Join(root, "ansible"), map[string]any{"flock_host_arch": tc.arch}, "flock_deb", &got)
			want := ""
			if tc.want != "" {
				want = filepath.Join(root, tc.want)
			}
			if got != want {
				t.Errorf("flock_deb on %s among %q: %q, want %q", tc.arch, tc.files, got, want)
			}
		})
	}
}

// TestAnsibleSpecNeeds: what the role installs for the levels of the
// spec's agents (an agent's own, else defaults.level, else process; agents:
// {count: N} are all the defaults'), as the role evaluates it.
//
// Tier: tools (ansible-core; skipped without it, failed in CI).
func TestAnsibleSpecNeeds(t *testing.T) {
	ansible := harness.AnsibleTier.Tool(t, "ansible")
	base := []string{"systemd", "nftables", "dbus"}
	podman := append(slices.Clone(base), "podman", "crun")
	for _, tc := range []struct {
		name     string
		spec     any
		levels   []string
		packages []string
		runsc    bool
	}{
		{"the example: level process alone", exampleFlockSpec(), []string{"process"}, base, false},
		{"an agent at level gvisor needs runsc", map[string]any{"agents": []any{
			map[string]any{"id": 1}, map[string]any{"id": 2, "level": "gvisor", "rootfs": "/r"}}},
			[]string{"process", "gvisor"}, base, true},
		{"defaults.level podman for agents: {count: 3}", map[string]any{
			"defaults": map[string]any{"level": "podman"}, "agents": map[string]any{"count": 3}},
			[]string{"podman"}, podman, false},
		{"an agent's own level over the defaults'", map[string]any{
			"defaults": map[string]any{"level": "gvisor"},
			"agents":   []any{map[string]any{"id": 1, "level": "process"}, map[string]any{"id": 2, "level": "podman"}}},
			[]string{"process", "podman"}, podman, false},
		{"a spec's text", "agents:\n  - {id: 1, level: gvisor, rootfs: /r}\n  - {id: 2, level: podman, rootfs: /r}\n",
			[]string{"gvisor", "podman"}, podman, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got struct {
				Levels   []string `json:"levels"`
				Packages []string `json:"packages"`
				Runsc    bool     `json:"runsc"`
			}
			roleEval(t, ansible, harness.InRepo(t, "ansible"), map[string]any{"flock_spec": tc.spec},
				"{{ {'levels': flock_spec_levels, 'packages': flock_needed_packages, 'runsc': flock_needs_runsc | bool} }}", &got)
			if !reflect.DeepEqual(got.Levels, tc.levels) || !reflect.DeepEqual(got.Packages, tc.packages) || got.Runsc != tc.runsc {
				t.Errorf("levels %q, packages %q, runsc %v; want %q, %q, %v", got.Levels, got.Packages, got.Runsc, tc.levels, tc.packages, tc.runsc)
			}
		})
	}
}

// roleEval evaluates expr (a variable's name, or a template) with the
// role's defaults, vars and filters, playbook_dir at playbookDir, and
// vars over them, and decodes the value into v.
func roleEval(t *testing.T, ansible, playbookDir string, vars map[string]any, expr string, v any) {
	t.Helper()
	dir := t.TempDir()
	env := append(harness.AnsibleEnv(t, dir), "ANSIBLE_FILTER_PLUGINS="+harness.InRepo(t, "ansible", "roles", "flock", "filter_plugins"))
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	varsFile := filepath.Join(dir, "vars.json")
	if err := os.WriteFile(varsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(expr, "{{") {
		expr = "{{ " + expr + " }}"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	role := harness.InRepo(t, "ansible", "roles", "flock")
	out, err := harness.RunInRepo(ctx, env, ansible, "localhost", "-i", "localhost,", "-c", "local",
		"--playbook-dir", playbookDir,
		"-e", "ansible_python_interpreter={{ ansible_playbook_python }}",
		"-e", "@"+filepath.Join(role, "defaults", "main.yml"),
		"-e", "@"+filepath.Join(role, "vars", "main.yml"),
		"-e", "@"+varsFile,
		"-m", "ansible.builtin.debug", "-a", "msg="+expr)
	if err != nil {
		t.Fatalf("ansible -m debug: %v\n%s", err, out)
	}
	var res struct {
		Msg json.RawMessage `json:"msg"`
	}
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("ansible -m debug printed no result:\n%s", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &res); err != nil {
		t.Fatalf("ansible -m debug: %v\n%s", err, out)
	}
	if err := json.Unmarshal(res.Msg, v); err != nil {
		t.Fatalf("%s is %s: %v", expr, res.Msg, err)
	}
}

// TestAnsibleArgumentSpecs: meta/argument_specs.yml, which Ansible checks
// the variables against, declares every variable of defaults/main.yml
// with its default, a type and a description, and nothing else; and the
// role's idea of each contained level's runtime is the sandbox's.
//
// Unit tier: reads the role's files.
func TestAnsibleArgumentSpecs(t *testing.T) {
	role := harness.InRepo(t, "ansible", "roles", "flock")
	var defaults map[string]any
	readYAML(t, filepath.Join(role, "defaults", "main.yml"), &defaults)
	var specs struct {
		ArgumentSpecs map[string]struct {
			Options map[string]struct {
				Type        string   `yaml:"type"`
				Default     any      `yaml:"default"`
				Description []string `yaml:"description"`
			} `yaml:"options"`
		} `yaml:"argument_specs"`
	}
	readYAML(t, filepath.Join(role, "meta", "argument_specs.yml"), &specs)
	opts := specs.ArgumentSpecs["main"].Options
	for name, def := range defaults {
		o, ok := opts[name]
		switch {
		case !ok:
			t.Errorf("defaults/main.yml's %s is not in meta/argument_specs.yml", name)
		case o.Type == "" || len(o.Description) == 0:
			t.Errorf("meta/argument_specs.yml: %s has no type or no description", name)
		case !reflect.DeepEqual(o.Default, def):
			t.Errorf("meta/argument_specs.yml: %s's default is %#v, defaults/main.yml's %#v", name, o.Default, def)
		}
	}
	for name := range opts {
		if _, ok := defaults[name]; !ok {
			t.Errorf("meta/argument_specs.yml declares %s, which defaults/main.yml does not set", name)
		}
	}

	var vars struct {
		LevelPackages map[string][]string `yaml:"flock_level_packages"`
		RunscPath     string              `yaml:"flock_runsc_path"`
	}
	readYAML(t, filepath.Join(role, "vars", "main.yml"), &vars)
	for _, l := range sandbox.Contained() {
		rt := l.Profile().Runtime
		switch {
		case rt.Name == "runsc": // no Debian package: the role copies the project's
			if vars.RunscPath != rt.Default || l != sandbox.GVisor {
				t.Errorf("vars/main.yml: runsc goes to %s for level gvisor; flock looks for it at %s for level %s", vars.RunscPath, rt.Default, l)
			}
		case !slices.Contains(vars.LevelPackages[string(l)], rt.Name):
			t.Errorf("vars/main.yml: level %s installs %q, without its runtime %s", l, vars.LevelPackages[string(l)], rt.Name)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
