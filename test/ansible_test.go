package test

// The Ansible role and playbook (ansible/): their syntax and templates with
// the tools alone (tier: tools), and the real thing against a qemu VM
// (tier: root + VM).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/harness"
)

// TestAnsiblePlaybookSyntax checks the playbook, the role and the example
// inventory with ansible-core alone.
//
// Tier: tools (ansible-core; skipped without it, failed in CI).
func TestAnsiblePlaybookSyntax(t *testing.T) {
	playbook := harness.AnsibleTier.Tool(t, "ansible-playbook")
	inventory := harness.AnsibleTier.Tool(t, "ansible-inventory")
	env := harness.AnsibleEnv(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The syntax check resolves every module and filter: with no
	// collections on the path, one outside ansible.builtin fails it.
	out, err := harness.RunInRepo(ctx, env, playbook, "--syntax-check", "-i", "ansible/hosts.example", "ansible/site.yml")
	if err != nil || !strings.Contains(out, "playbook: ansible/site.yml") {
		t.Fatalf("ansible-playbook --syntax-check: %v\n%s", err, out)
	}
	if strings.Contains(out, "[WARNING]") {
		t.Errorf("ansible-playbook --syntax-check warns:\n%s", out)
	}

	// The example inventory: one host, in the group the playbook plays on.
	out, err = harness.RunInRepo(ctx, env, inventory, "-i", "ansible/hosts.example", "--list")
	if err != nil {
		t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
	}
	var inv map[string]struct {
		Hosts []string `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &inv); err != nil {
		t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
	}
	if hosts := inv["flock"].Hosts; len(hosts) != 1 {
		t.Errorf("ansible/hosts.example: group flock has hosts %q, want one", hosts)
	}

	// The example of a flock on several hosts: three, one of them named
	// in the spec by flock_host.
	out, err = harness.RunInRepo(ctx, env, playbook, "--syntax-check", "-i", "ansible/hosts.cluster.example", "ansible/site.yml")
	if err != nil || strings.Contains(out, "[WARNING]") {
		t.Errorf("ansible-playbook --syntax-check -i ansible/hosts.cluster.example: %v\n%s", err, out)
	}
	out, err = harness.RunInRepo(ctx, env, inventory, "-i", "ansible/hosts.cluster.example", "--list")
	if err != nil {
		t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
	}
	var cinv struct {
		Meta struct {
			HostVars map[string]map[string]any `json:"hostvars"`
		} `json:"_meta"`
		Flock struct {
			Hosts []string `json:"hosts"`
		} `json:"flock"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &cinv); err != nil {
		t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
	}
	var names []string
	for _, h := range cinv.Flock.Hosts {
		name, _ := cinv.Meta.HostVars[h]["flock_host"].(string)
		if name == "" {
			name = h
		}
		names = append(names, name)
	}
	if got := strings.Join(names, " "); got != "a b c" {
		t.Errorf("ansible/hosts.cluster.example: group flock is hosts %q (flock_host or name), want a b c", got)
	}
	site, err := os.ReadFile(harness.InRepo(t, "ansible", "site.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+hosts: flock$`).Match(site) || !regexp.MustCompile(`(?m)^\s+become: true$`).Match(site) {
		t.Errorf("ansible/site.yml does not play on hosts: flock with become: true:\n%s", site)
	}
}

// TestAnsibleSpecTemplate renders the role's spec template (the one
// /etc/flock/flock.yaml is written from) on the controller and parses the
// result with flock's own spec parser: the role's default and the group
// vars example are the flock of examples/flock.yaml, and a spec that uses
// every kind of field comes through to_nice_yaml unchanged.
//
// Tier: tools (ansible-core; skipped without it, failed in CI).
func TestAnsibleSpecTemplate(t *testing.T) {
	ansible := harness.AnsibleTier.Tool(t, "ansible")
	dir := t.TempDir()
	env := harness.AnsibleEnv(t, dir)
	example, err := spec.Load(harness.InRepo(t, "examples", "flock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Every kind of value a spec holds, and strings YAML could misread:
	// "25%", "$HOME", "on", "*", IPv6 in brackets, an address with a port.
	const rich = `root: /srv/agents
uid_base: 3000000000
bus: {listen: "127.0.0.1:4333"}
defaults:
  limits: {memory: 64M, cpu: 25%, tasks: 20}
  egress: ["192.0.2.0/24:53/udp"]
agents:
  - id: 1
    role: orchestrator
    common: rw
    limits: {memory: 1G, cpu: 200%, tasks: 100}
  - id: 7
    command: ["/bin/sh", "-c", "echo $HOME: on; exec cat"]
    egress: ["10.1.2.3:443", "[2001:db8::1]:*"]
  - id: 65535
    role: monitor
`
	richWant, err := spec.Parse([]byte(rich))
	if err != nil {
		t.Fatalf("the test's own spec: %v", err)
	}
	richFile := filepath.Join(dir, "rich.yml")
	richVars := "flock_spec:\n  " + strings.ReplaceAll(strings.TrimSuffix(rich, "\n"), "\n", "\n  ") + "\n"
	if err := os.WriteFile(richFile, []byte(richVars), 0o644); err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(dir, "count.json")
	if err := os.WriteFile(count, []byte(`{"flock_spec": {"agents": {"count": 5}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	countWant, err := spec.Count(5)
	if err != nil {
		t.Fatal(err)
	}
	// flock_spec may also be a spec's text, e.g. lookup('file', 'flock.yaml').
	exampleText, err := os.ReadFile(harness.InRepo(t, "examples", "flock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.json")
	b, err := json.Marshal(map[string]string{"flock_spec": string(exampleText)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// The example of a flock on several hosts: what it says, read by
	// flock's own parser straight from the file.
	clusterVars := harness.InRepo(t, "ansible", "group_vars", "flock.yml.cluster.example")
	raw, err := os.ReadFile(clusterVars)
	if err != nil {
		t.Fatal(err)
	}
	var vars struct {
		Spec yaml.Node `yaml:"flock_spec"`
	}
	if err := yaml.Unmarshal(raw, &vars); err != nil {
		t.Fatalf("%s: %v", clusterVars, err)
	}
	clusterText, err := yaml.Marshal(&vars.Spec)
	if err != nil {
		t.Fatal(err)
	}
	clusterWant, err := spec.Parse(clusterText)
	if err != nil {
		t.Fatalf("%s: flock_spec: %v", clusterVars, err)
	}
	if !clusterWant.Clustered() {
		t.Errorf("%s: flock_spec is not a flock on several hosts", clusterVars)
	}

	for _, tc := range []struct {
		name, vars string
		want       *spec.Flock
	}{
		{"group vars example of several hosts", clusterVars, clusterWant},
		{"role default", harness.InRepo(t, "ansible", "roles", "flock", "defaults", "main.yml"), example},
		{"group vars example", harness.InRepo(t, "ansible", "group_vars", "flock.yml.example"), example},
		{"every kind of field", richFile, richWant},
		{"agents: {count: 5}", count, countWant},
		{"the text of a spec", text, example},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "flock.yaml")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := harness.RunInRepo(ctx, env, ansible, "localhost", "-i", "localhost,", "-c", "local",
				"-e", "ansible_python_interpreter={{ ansible_playbook_python }}",
				"-e", "@"+harness.InRepo(t, "ansible", "roles", "flock", "defaults", "main.yml"),
				"-e", "@"+tc.vars,
				"-m", "ansible.builtin.template",
				"-a", "src="+harness.InRepo(t, "ansible", "roles", "flock", "templates", "flock.yaml.j2")+" dest="+dest)
			if err != nil {
				t.Fatalf("ansible -m template: %v\n%s", err, out)
			}
			got, err := spec.Load(dest)
			if err != nil {
				b, _ := os.ReadFile(dest)
				t.Fatalf("the rendered spec does not parse: %v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, tc.want) {
				b, _ := os.ReadFile(dest)
				t.Errorf("the rendered spec is another flock:\n got %+v\nwant %+v\nrendered:\n%s", got, tc.want, b)
			}
		})
	}
}

// TestAnsibleRole plays ansible/site.yml against one systemd machine over
// ssh, as an operator would, for what the role decides rather than what a
// fresh Debian shows (TestVMAnsible): --check with the package on a host
// without flock changes nothing, a bad spec fails the play (and --check)
// with flockctl's message and changes nothing, and a new flockctl beside
// the same flock-agent restarts the bus but no agent, the run after
// changing nothing. Then flock_files are written root's alone and never
// shown, and flock_state: absent takes the flock away (--check first),
// then changes nothing.
//
// Tier: root + nspawn + ansible (HostsTier; one machine with sshd on a
// private network, the test its controller).
func TestAnsibleRole(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a systemd machine: not with -short")
	}
	playbook := harness.AnsibleTier.Tool(t, "ansible-playbook")
	deb := harness.Deb(t)
	bin := harness.BinDir(t)
	h := harness.BootHosts(t, []string{"a"}, harness.Options{NoBinaries: true})
	m := h.Machine("a")
	p := harness.NewHostsPlayer(t, h, playbook, "ansible/site.yml", map[string]any{"flock_bin_dir": bin}, nil)
	agents := []int{1, 2, 3}

	if !t.Run("check mode with the package on a host without flock changes nothing", func(t *testing.T) {
		paths := []string{"/usr/bin/flockctl", "/usr/bin/flock-agent", "/usr/local/bin/flockctl", "/var/cache/flock", "/etc/flock", "/etc/systemd/system/flock.service"}
		for _, path := range paths {
			if out, _, err := run(t, m, "ls", "-d", path); err == nil {
				t.Fatalf("the machine has %s before any play (does the host it is made of have flock installed?)", out)
			}
		}
		r := p.Play(t, map[string]any{"flock_install": "package", "flock_deb": deb}, "--check", "--diff")
		r.MustSucceed(t)
		if r.Recap.Changed == 0 {
			t.Errorf("--check on a new host: changed=0, want changes\n%s", r.Out)
		}
		r.AssertTasks(t, map[string]string{
			"Copy the flock package to the host":                         "changed",
			"Install the flock package":                                  "skipping",
			"Install flockctl in /usr/local/bin":                         "skipping",
			"Install the spec (flockctl explain checks it first)":        "changed",
			"Say that a real run would install and provision everything": "changed",
			"Ask flockctl provision --dry-run what it would change":      "skipping",
			"Keep flock.service (the bus) enabled and running":           "skipping",
		})
		assertNoPaths(t, m, "--check made", paths...)
	}) {
		t.FailNow()
	}

	if !t.Run("first run with the binaries provisions the example flock", func(t *testing.T) {
		r := p.Play(t, nil)
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Install flockctl in /usr/local/bin": "changed",
			"Provision the flock":                "changed",
		})
		clusterWaitUnits(t, m, time.Minute, agents...)
		assertPrograms(t, m, "/usr/local/bin")
	}) {
		t.FailNow()
	}

	// memory: lots, as agent 2's (agents[1]) limit.
	bad := exampleFlockSpec()
	bad["agents"].([]any)[1].(map[string]any)["limits"] = map[string]any{"memory": "lots"}
	// As the play prints it: in JSON, so the quotes are escaped.
	badField := regexp.MustCompile(`agents\[1\]\.limits\.memory: \\"lots\\" is not a size`)

	for _, mode := range []struct {
		name, task string
		args       []string
	}{
		{"a bad spec fails the play with flockctl's message and changes nothing", "Say why the spec was refused", nil},
		{"a bad spec fails --check too", "Ask flockctl provision --dry-run what it would change", []string{"--check"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			before := vmSnapshot(t, m)
			r := p.Play(t, flockSpec(bad), mode.args...)
			if r.Err == nil || r.Recap.Failed != 1 || r.Recap.Unreachable != 0 {
				t.Errorf("bad spec: %v, recap %+v; want the play to fail on the host\n%s", r.Err, r.Recap, r.Out)
			}
			if got := r.Tasks[mode.task]; got != "fatal" {
				t.Errorf("task %q: %q, want fatal\n%s", mode.task, got, r.Out)
			}
			if !badField.MatchString(r.Section(mode.task)) {
				t.Errorf("the failure does not carry flockctl's message (%s):\n%s", badField, r.Out)
			}
			if got := r.Tasks["Provision the flock"]; got == "ok" || got == "changed" {
				t.Errorf("task Provision the flock ran (%q) with a bad spec\n%s", got, r.Out)
			}
			assertSame(t, before, vmSnapshot(t, m))
		})
	}

	t.Run("a new flockctl restarts the bus and no agent", func(t *testing.T) {
		// A rebuilt flockctl (another build id) beside the same
		// flock-agent: what an upgrade of flockctl alone looks like.
		newBin := harness.Build(t, []string{"-ldflags=-X=main.upgradeTest=1"}, "./cmd/flockctl")
		if err := harness.CopyFile(filepath.Join(bin, "flock-agent"), filepath.Join(newBin, "flock-agent"), 0o755); err != nil {
			t.Fatal(err)
		}
		binaries := map[string]any{"flock_bin_dir": newBin}
		before := vmSnapshot(t, m)
		r := p.Play(t, binaries)
		r.MustSucceed(t)
		if got := r.Tasks["Install flockctl in /usr/local/bin"]; got != "changed" {
			t.Errorf("task Install flockctl in /usr/local/bin: %q, want changed\n%s", got, r.Out)
		}
		if got := r.Tasks["Install flock-agent in /usr/local/bin"]; got != "ok" {
			t.Errorf("task Install flock-agent in /usr/local/bin: %q, want ok (same bytes)\n%s", got, r.Out)
		}
		after := vmSnapshot(t, m)
		if before["flock.service"] == after["flock.service"] {
			t.Errorf("flock.service was not restarted: %s", after["flock.service"])
		}
		for _, id := range agents {
			k := unitName(id)
			if before[k] != after[k] {
				t.Errorf("%s restarted with the bus: %s -> %s", k, before[k], after[k])
			}
		}
		m.Eventually(t, time.Minute, func() error {
			for _, a := range status(t, m) {
				if a.State != "active" || a.Bus != "connected" {
					return fmt.Errorf("agent %d: %s, bus %s", a.ID, a.State, a.Bus)
				}
			}
			return nil
		})
		r = p.Play(t, binaries)
		r.MustSucceed(t)
		if r.Recap.Changed != 0 {
			t.Errorf("the run after the upgrade: changed=%d, want 0\n%s", r.Recap.Changed, r.Out)
		}
	})

	files := roleFiles(t, p, m)
	roleAbsent(t, p, m, files)
}

// TestVMAnsible runs ansible/site.yml against a fresh qemu VM (Debian 12,
// no flock binaries installed, no network but its forwarded ssh) for what
// only a fresh Debian shows; what the role decides is TestAnsibleRole's,
// on a machine. With the package (flock_install: package, the deb make deb
// builds): the first run installs it (apt, on a host with nothing of
// flock's) and provisions the 3-agent example, the second changes
// nothing, --check --diff with a changed spec shows the spec's diff and
// flockctl's plan and changes nothing, and a newer package upgrades
// flockctl and flock-agent and restarts what runs them. Then the switch
// to the binaries (flock_install: binaries) moves the units from the
// package's programs to /usr/local/bin. Last, an agent at level gvisor:
// the role copies the controller's runsc, and the agent runs in gVisor.
//
// Tier: root + VM (qemu, harness.BootVMWith), with ansible-core on the
// controller (this machine).
func TestVMAnsible(t *testing.T) {
	t.Parallel() // as many VMs at once as -parallel allows (Makefile: VM_PARALLEL)
	if testing.Short() {
		t.Skip("boots a qemu VM: not with -short")
	}
	playbook := harness.AnsibleTier.Tool(t, "ansible-playbook")
	deb := harness.Deb(t)
	v := harness.BootVMWith(t, harness.VMOptions{NoBinaries: true})
	bin := harness.BinDir(t)
	p := harness.NewAnsiblePlayer(t, v, playbook, "ansible/site.yml", map[string]any{
		"flock_bin_dir": bin, "flock_install": "package", "flock_deb": deb})
	vmAgents := []int{1, 2, 3}

	if !t.Run("first run provisions the example flock", func(t *testing.T) {
		for _, path := range []string{"/usr/bin/flockctl", "/usr/bin/flock-agent", "/var/cache/flock", "/etc/flock", "/etc/systemd/system/flock.service"} {
			if out, _, err := run(t, v, "ls", "-d", path); err == nil {
				t.Fatalf("the fresh VM has %s before the first run", out)
			}
		}
		r := p.Play(t, nil)
		r.MustSucceed(t)
		if r.Recap.Changed == 0 {
			t.Errorf("first run: changed=0, want changes\n%s", r.Out)
		}
		r.AssertTasks(t, map[string]string{
			"Copy the flock package to the host":                  "changed",
			"Install the flock package":                           "changed",
			"Install flockctl in /usr/local/bin":                  "skipping",
			"Install the spec (flockctl explain checks it first)": "changed",
			"Provision the flock":                                 "changed",
			// The VM has them all (and no network to fetch any).
			"Install the missing Debian packages": "skipping",
			// provision installed and started it: the task only confirms.
			"Keep flock.service (the bus) enabled and running": "ok",
			"Read flockctl status":                             "ok",
		})
		v.Eventually(t, time.Minute, func() error {
			out, _, err := run(t, v, "systemctl", "is-active", "flock-agent@3")
			if strings.TrimSpace(out) != "active" {
				return fmt.Errorf("systemctl is-active flock-agent@3: %q (%v)", out, err)
			}
			return nil
		})
		out, _, err := run(t, v, "systemctl", "status", "--no-pager", "flock-agent@3")
		if err != nil || !strings.Contains(out, "Active: active (running)") {
			t.Errorf("systemctl status flock-agent@3: %v\n%s", err, out)
		}
		for _, a := range status(t, v) {
			if a.State != "active" {
				t.Errorf("agent %d is %q after the first run", a.ID, a.State)
			}
		}
		if got := fmt.Sprint(agentIDs(status(t, v))); got != fmt.Sprint(vmAgents) {
			t.Errorf("flockctl status lists agents %s, want %v", got, vmAgents)
		}
		if out, _, err := run(t, v, "systemctl", "is-enabled", "flock.service"); strings.TrimSpace(out) != "enabled" {
			t.Errorf("systemctl is-enabled flock.service: %q (%v)", out, err)
		}
		if !strings.Contains(r.Out, "flock-agent@3.service") || !strings.Contains(r.Out, "ID  USER") {
			t.Errorf("the play does not show flockctl status:\n%s", r.Out)
		}
		assertPrograms(t, v, "/usr/bin")
	}) {
		t.FailNow()
	}

	t.Run("second run with the same vars changes nothing", func(t *testing.T) {
		before := vmSnapshot(t, v)
		r := p.Play(t, nil)
		r.MustSucceed(t)
		if r.Recap.Changed != 0 {
			t.Errorf("second run: changed=%d, want 0\n%s", r.Recap.Changed, r.Out)
		}
		if got := r.Tasks["Provision the flock"]; got != "ok" {
			t.Errorf("task Provision the flock: %q, want ok\n%s", got, r.Out)
		}
		assertSame(t, before, vmSnapshot(t, v))
	})

	// Agent 2 with more memory: flockctl would restart flock-agent@2 only.
	changed := exampleFlockSpec()
	changed["agents"].([]any)[1].(map[string]any)["limits"] = map[string]any{"memory": "192M"}

	t.Run("check and diff with a changed spec show the plan and change nothing", func(t *testing.T) {
		before := vmSnapshot(t, v)
		r := p.Play(t, flockSpec(changed), "--check", "--diff")
		r.MustSucceed(t)
		if r.Recap.Changed == 0 {
			t.Errorf("--check with a changed spec: changed=0, want changes\n%s", r.Out)
		}
		r.AssertTasks(t, map[string]string{
			"Install the spec (flockctl explain checks it first)":   "changed",
			"Ask flockctl provision --dry-run what it would change": "changed",
			"Show flockctl's plan":                                  "ok",
			"Provision the flock":                                   "skipping",
		})
		// The template's diff, and flockctl's plan: agent 2 restarts, no
		// other agent does.
		// The spec's diff is the change alone (the rendering is canonical).
		var diff []string
		for _, l := range strings.Split(r.Section("Install the spec (flockctl explain checks it first)"), "\n") {
			if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
				diff = append(diff, l)
			}
		}
		if want := []string{"+  limits:", "+    memory: 192M"}; !reflect.DeepEqual(diff, want) {
			t.Errorf("--diff of the spec: %q, want %q\n%s", diff, want, r.Out)
		}
		plan := r.Section("Show flockctl's plan")
		if !regexp.MustCompile(`restart unit\s+flock-agent@2\.service`).MatchString(plan) {
			t.Errorf("--diff does not show flockctl's plan to restart flock-agent@2:\n%s", r.Out)
		}
		if strings.Contains(plan, "flock-agent@1.service") || strings.Contains(plan, "flock-agent@3.service") {
			t.Errorf("the plan touches another agent than 2:\n%s", plan)
		}
		assertSame(t, before, vmSnapshot(t, v))
		if out, _, _ := run(t, v, "sh", "-c", "ls -d /tmp/flock-spec.* 2>/dev/null"); strings.TrimSpace(out) != "" {
			t.Errorf("the check run left its temporary spec behind: %s", out)
		}
	})

	t.Run("a newer package restarts the bus and the agents, which run it", func(t *testing.T) {
		// The same source as another version: every program is new.
		newDeb := harness.NextDeb(t)
		newVersion, err := harness.DebField(newDeb, "Version")
		if err != nil {
			t.Fatal(err)
		}
		before := vmSnapshot(t, v)
		r := p.Play(t, map[string]any{"flock_deb": newDeb})
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Copy the flock package to the host": "changed",
			"Install the flock package":          "changed",
			"Provision the flock":                "changed",
		})
		if out := mustRun(t, v, "flockctl", "version"); !strings.HasPrefix(out, "flockctl "+newVersion+" ") {
			t.Errorf("after the upgrade: %q, want version %s", out, newVersion)
		}
		after := vmSnapshot(t, v)
		for _, k := range []string{"flock.service", unitName(1), unitName(2), unitName(3)} {
			if before[k] == after[k] {
				t.Errorf("%s was not restarted onto the new package: %s", k, after[k])
			}
		}
		vmWaitActive(t, v, 2*time.Minute, vmAgents...)
	})

	t.Run("the binaries path moves the units to /usr/local/bin", func(t *testing.T) {
		r := p.Play(t, map[string]any{"flock_install": "binaries"})
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Install flockctl in /usr/local/bin":    "changed",
			"Install flock-agent in /usr/local/bin": "changed",
			"Copy the flock package to the host":    "skipping",
			"Provision the flock":                   "changed",
		})
		vmWaitActive(t, v, 2*time.Minute, vmAgents...)
		assertPrograms(t, v, "/usr/local/bin")
	})

	t.Run("an agent at level gvisor rolled out by the role runs in gVisor", func(t *testing.T) {
		vmAnsibleGVisor(t, v, p)
	})
}

// assertPrograms checks that flock.service and every agent's unit run the
// flockctl and flock-agent in dir.
func assertPrograms(t *testing.T, v runner, dir string) {
	t.Helper()
	if p := vmProps(t, v, "flock.service", "ExecStart"); !strings.Contains(p["ExecStart"], "path="+dir+"/flockctl ") {
		t.Errorf("flock.service runs %s, want %s/flockctl", p["ExecStart"], dir)
	}
	for _, id := range []int{1, 2, 3} {
		if p := vmProps(t, v, unitName(id), "ExecStart"); !strings.Contains(p["ExecStart"], "path="+dir+"/flock-agent ") {
			t.Errorf("%s runs %s, want %s/flock-agent", unitName(id), p["ExecStart"], dir)
		}
	}
}

// flockSpec is the vars that make s the role's flock_spec.
func flockSpec(s map[string]any) map[string]any { return map[string]any{"flock_spec": s} }

// exampleFlockSpec is examples/flock.yaml as the flock_spec variable, fresh
// each call.
func exampleFlockSpec() map[string]any {
	return map[string]any{
		"defaults": map[string]any{"limits": map[string]any{"memory": "256M", "cpu": "50%", "tasks": 50}},
		"agents": []any{
			map[string]any{"id": 1, "role": "orchestrator", "common": "rw"},
			map[string]any{"id": 2, "role": "worker", "command": []string{"/usr/bin/tr", "a-z", "A-Z"}},
			map[string]any{"id": 3, "role": "monitor", "limits": map[string]any{"memory": "128M"}},
		},
	}
}

func agentIDs(st []agentStatus) []int {
	var out []int
	for _, a := range st {
		out = append(out, a.ID)
	}
	return out
}

// vmSnapshot is what a run that changes nothing leaves as it was: the
// spec, the binaries, flockctl's view, and every unit's current run, in a
// VM or a machine.
func vmSnapshot(t testing.TB, v runner) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for name, argv := range map[string][]string{
		"spec":     {"sh", "-c", "ls -l --time-style=full-iso /etc/flock/flock.yaml && cat /etc/flock/flock.yaml"},
		"binaries": {"sh", "-c", "cd / && ls -l --time-style=full-iso usr/bin/flock* usr/local/bin/flock* var/cache/flock 2>&1; sha256sum usr/bin/flock* usr/local/bin/flock* 2>&1; dpkg-query -W flock 2>&1"},
		"state":    {"sh", "-c", "cat /var/lib/flock/applied.json /etc/flock/bus.json"},
		"users":    {"sh", "-c", "getent passwd | grep ^flock"},
	} {
		out, errOut, err := run(t, v, argv...)
		snap[name] = fmt.Sprintf("%s%s err=%v", out, errOut, err)
	}
	// flockctl's view, less what moves by itself (heartbeats).
	out, errOut, err := run(t, v, "flockctl", "status", "--output", "json")
	var rows []map[string]any
	if err == nil {
		err = json.Unmarshal([]byte(out), &rows)
	}
	for _, r := range rows {
		delete(r, "last_heartbeat")
		delete(r, "heartbeat_age_s")
	}
	b, _ := json.Marshal(rows)
	snap["status"] = fmt.Sprintf("%s err=%v %s", b, err, errOut)
	for _, unit := range []string{"flock.service", unitName(1), unitName(2), unitName(3)} {
		out, errOut, err := run(t, v, "systemctl", "show", "-p", "ActiveState", "-p", "ActiveEnterTimestamp",
			"-p", "ActiveEnterTimestampMonotonic", "-p", "InvocationID", "-p", "MainPID", unit)
		snap[unit] = fmt.Sprintf("%s%s err=%v", out, errOut, err)
	}
	return snap
}

func assertSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, b := range before {
		if a := after[k]; a != b {
			t.Errorf("%s changed:\nbefore: %s\nafter:  %s", k, b, a)
		}
	}
}
