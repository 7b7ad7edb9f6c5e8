package test

// The Ansible role and playbook (ansible/): their syntax and templates with
// the tools alone (tier: tools), and the real thing against a qemu VM
// (tier: root + VM).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/harness"
)

// inRepo is a path in the repository; tests run in test/.
func inRepo(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// toolOf applies the tier rule to tr and returns the path of its program
// name.
func toolOf(t testing.TB, tr harness.Tier, name string) string {
	t.Helper()
	tr.Require(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("tier %s: %v", tr.Name, err)
	}
	return p
}

// ansibleEnv is the environment of every ansible command of the tests:
// an empty config of its own (no ansible.cfg of the developer's), no
// colour, and no collection but what ansible-core ships, as on a host
// with only Debian's ansible-core (CI), so a module from anywhere else
// fails here too. Everything Ansible writes goes under dir.
func ansibleEnv(t testing.TB, dir string) []string {
	t.Helper()
	cfg := filepath.Join(dir, "ansible.cfg")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANSIBLE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"ANSIBLE_CONFIG="+cfg,
		"ANSIBLE_HOME="+filepath.Join(dir, "home"),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_COLLECTIONS_PATH="+filepath.Join(dir, "collections"),
		"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=False",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_NOCOWS=1",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_STDOUT_CALLBACK=default",
		"ANSIBLE_DISPLAY_SKIPPED_HOSTS=True",
	)
}

// runInRepo runs argv in the repository's root with env and returns its
// stdout and stderr together.
func runInRepo(ctx context.Context, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	dir, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	return out.String(), err
}

// TestAnsiblePlaybookSyntax checks the playbook, the role and the example
// inventory with ansible-core alone.
//
// Tier: tools (ansible-core; skipped without it, failed in CI).
func TestAnsiblePlaybookSyntax(t *testing.T) {
	playbook := toolOf(t, harness.AnsibleTier, "ansible-playbook")
	inventory := toolOf(t, harness.AnsibleTier, "ansible-inventory")
	env := ansibleEnv(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The syntax check resolves every module and filter: with no
	// collections on the path, one outside ansible.builtin fails it.
	out, err := runInRepo(ctx, env, playbook, "--syntax-check", "-i", "ansible/hosts.example", "ansible/site.yml")
	if err != nil || !strings.Contains(out, "playbook: ansible/site.yml") {
		t.Fatalf("ansible-playbook --syntax-check: %v\n%s", err, out)
	}
	if strings.Contains(out, "[WARNING]") {
		t.Errorf("ansible-playbook --syntax-check warns:\n%s", out)
	}

	// The example inventory: one host, in the group the playbook plays on.
	out, err = runInRepo(ctx, env, inventory, "-i", "ansible/hosts.example", "--list")
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
	site, err := os.ReadFile(inRepo(t, "ansible", "site.yml"))
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
	ansible := toolOf(t, harness.AnsibleTier, "ansible")
	dir := t.TempDir()
	env := ansibleEnv(t, dir)
	example, err := spec.Load(inRepo(t, "examples", "flock.yaml"))
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
	exampleText, err := os.ReadFile(inRepo(t, "examples", "flock.yaml"))
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

	for _, tc := range []struct {
		name, vars string
		want       *spec.Flock
	}{
		{"role default", inRepo(t, "ansible", "roles", "flock", "defaults", "main.yml"), example},
		{"group vars example", inRepo(t, "ansible", "group_vars", "flock.yml.example"), example},
		{"every kind of field", richFile, richWant},
		{"agents: {count: 5}", count, countWant},
		{"the text of a spec", text, example},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "flock.yaml")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := runInRepo(ctx, env, ansible, "localhost", "-i", "localhost,", "-c", "local",
				"-e", "ansible_python_interpreter={{ ansible_playbook_python }}",
				"-e", "@"+inRepo(t, "ansible", "roles", "flock", "defaults", "main.yml"),
				"-e", "@"+tc.vars,
				"-m", "ansible.builtin.template",
				"-a", "src="+inRepo(t, "ansible", "roles", "flock", "templates", "flock.yaml.j2")+" dest="+dest)
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

// TestVMAnsible runs ansible/site.yml against a fresh qemu VM (Debian 12,
// no flock binaries installed, no network but its forwarded ssh) the way
// an operator would, and checks what the role promises: the first run
// installs and provisions the 3-agent example, the second changes nothing,
// --check --diff with a changed spec shows the spec's diff and flockctl's
// plan and changes nothing, a bad spec fails the play with flockctl's
// message and changes nothing, and a new flockctl restarts the bus but no
// agent.
//
// Tier: root + VM (qemu, harness.BootVMWith), with ansible-core on the
// controller (this machine).
func TestVMAnsible(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a qemu VM: not with -short")
	}
	playbook := toolOf(t, harness.AnsibleTier, "ansible-playbook")
	v := harness.BootVMWith(t, harness.VMOptions{NoBinaries: true})
	p := &ansiblePlayer{v: v, playbook: playbook, dir: t.TempDir(), bin: buildFlockBinaries(t)}
	p.env = ansibleEnv(t, p.dir)
	p.writeInventory(t)
	vmAgents := []int{1, 2, 3}

	if !t.Run("check mode on a host without flock changes nothing", func(t *testing.T) {
		r := p.play(t, nil, "--check", "--diff")
		r.mustSucceed(t)
		if r.recap.Changed == 0 {
			t.Errorf("--check on a new host: changed=0, want changes\n%s", r.out)
		}
		r.assertTasks(t, map[string]string{
			"Install flockctl in /usr/local/bin":                         "changed",
			"Install the spec (flockctl explain checks it first)":        "changed",
			"Say that a real run would install and provision everything": "changed",
			"Ask flockctl provision --dry-run what it would change":      "skipping",
			"Keep flock.service (the bus) enabled and running":           "skipping",
		})
		for _, path := range []string{"/usr/local/bin/flockctl", "/usr/local/bin/flock-agent", "/etc/flock", "/etc/systemd/system/flock.service"} {
			if out, _, err := p.run(t, "ls", "-d", path); err == nil {
				t.Errorf("--check made %s", out)
			}
		}
	}) {
		t.FailNow()
	}

	if !t.Run("first run provisions the example flock", func(t *testing.T) {
		r := p.play(t, nil)
		r.mustSucceed(t)
		if r.recap.Changed == 0 {
			t.Errorf("first run: changed=0, want changes\n%s", r.out)
		}
		r.assertTasks(t, map[string]string{
			"Install flockctl in /usr/local/bin":                  "changed",
			"Install flock-agent in /usr/local/bin":               "changed",
			"Install the spec (flockctl explain checks it first)": "changed",
			"Provision the flock":                                 "changed",
			// The VM has them all (and no network to fetch any).
			"Install the missing Debian packages": "skipping",
			// provision installed and started it: the task only confirms.
			"Keep flock.service (the bus) enabled and running": "ok",
			"Read flockctl status":                             "ok",
		})
		p.v.Eventually(t, time.Minute, func() error {
			out, _, err := p.run(t, "systemctl", "is-active", "flock-agent@3")
			if strings.TrimSpace(out) != "active" {
				return fmt.Errorf("systemctl is-active flock-agent@3: %q (%v)", out, err)
			}
			return nil
		})
		out, _, err := p.run(t, "systemctl", "status", "--no-pager", "flock-agent@3")
		if err != nil || !strings.Contains(out, "Active: active (running)") {
			t.Errorf("systemctl status flock-agent@3: %v\n%s", err, out)
		}
		for _, a := range p.status(t) {
			if a.State != "active" {
				t.Errorf("agent %d is %q after the first run", a.ID, a.State)
			}
		}
		if got := fmt.Sprint(agentIDs(p.status(t))); got != fmt.Sprint(vmAgents) {
			t.Errorf("flockctl status lists agents %s, want %v", got, vmAgents)
		}
		if out, _, err := p.run(t, "systemctl", "is-enabled", "flock.service"); strings.TrimSpace(out) != "enabled" {
			t.Errorf("systemctl is-enabled flock.service: %q (%v)", out, err)
		}
		if !strings.Contains(r.out, "flock-agent@3.service") || !strings.Contains(r.out, "ID  USER") {
			t.Errorf("the play does not show flockctl status:\n%s", r.out)
		}
	}) {
		t.FailNow()
	}

	t.Run("second run with the same vars changes nothing", func(t *testing.T) {
		before := p.snapshot(t)
		r := p.play(t, nil)
		r.mustSucceed(t)
		if r.recap.Changed != 0 {
			t.Errorf("second run: changed=%d, want 0\n%s", r.recap.Changed, r.out)
		}
		if got := r.tasks["Provision the flock"]; got != "ok" {
			t.Errorf("task Provision the flock: %q, want ok\n%s", got, r.out)
		}
		p.assertSame(t, before, p.snapshot(t))
	})

	// Agent 2 with more memory: flockctl would restart flock-agent@2 only.
	changed := exampleFlockSpec()
	changed["agents"].([]any)[1].(map[string]any)["limits"] = map[string]any{"memory": "192M"}

	t.Run("check and diff with a changed spec show the plan and change nothing", func(t *testing.T) {
		before := p.snapshot(t)
		r := p.play(t, changed, "--check", "--diff")
		r.mustSucceed(t)
		if r.recap.Changed == 0 {
			t.Errorf("--check with a changed spec: changed=0, want changes\n%s", r.out)
		}
		r.assertTasks(t, map[string]string{
			"Install the spec (flockctl explain checks it first)":   "changed",
			"Ask flockctl provision --dry-run what it would change": "changed",
			"Show flockctl's plan":                                  "ok",
			"Provision the flock":                                   "skipping",
		})
		// The template's diff, and flockctl's plan: agent 2 restarts, no
		// other agent does.
		// The spec's diff is the change alone (the rendering is canonical).
		var diff []string
		for _, l := range strings.Split(r.section("Install the spec (flockctl explain checks it first)"), "\n") {
			if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
				diff = append(diff, l)
			}
		}
		if want := []string{"+  limits:", "+    memory: 192M"}; !reflect.DeepEqual(diff, want) {
			t.Errorf("--diff of the spec: %q, want %q\n%s", diff, want, r.out)
		}
		plan := r.section("Show flockctl's plan")
		if !regexp.MustCompile(`restart unit\s+flock-agent@2\.service`).MatchString(plan) {
			t.Errorf("--diff does not show flockctl's plan to restart flock-agent@2:\n%s", r.out)
		}
		if strings.Contains(plan, "flock-agent@1.service") || strings.Contains(plan, "flock-agent@3.service") {
			t.Errorf("the plan touches another agent than 2:\n%s", plan)
		}
		p.assertSame(t, before, p.snapshot(t))
		if out, _, _ := p.run(t, "sh", "-c", "ls -d /tmp/flock-spec.* 2>/dev/null"); strings.TrimSpace(out) != "" {
			t.Errorf("the check run left its temporary spec behind: %s", out)
		}
	})

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
			before := p.snapshot(t)
			r := p.play(t, bad, mode.args...)
			if r.err == nil || r.recap.Failed != 1 || r.recap.Unreachable != 0 {
				t.Errorf("bad spec: %v, recap %+v; want the play to fail on the host\n%s", r.err, r.recap, r.out)
			}
			if got := r.tasks[mode.task]; got != "fatal" {
				t.Errorf("task %q: %q, want fatal\n%s", mode.task, got, r.out)
			}
			if !badField.MatchString(r.section(mode.task)) {
				t.Errorf("the failure does not carry flockctl's message (%s):\n%s", badField, r.out)
			}
			if got := r.tasks["Provision the flock"]; got == "ok" || got == "changed" {
				t.Errorf("task Provision the flock ran (%q) with a bad spec\n%s", got, r.out)
			}
			p.assertSame(t, before, p.snapshot(t))
		})
	}

	t.Run("a new flockctl restarts the bus and no agent", func(t *testing.T) {
		// A rebuilt flockctl (another build id) beside the same
		// flock-agent: what an upgrade of flockctl alone looks like.
		newBin := buildFlockBinaries(t, "-ldflags=-X=main.upgradeTest=1")
		if err := copyFile(filepath.Join(p.bin, "flock-agent"), filepath.Join(newBin, "flock-agent")); err != nil {
			t.Fatal(err)
		}
		before := p.snapshot(t)
		r := p.play(t, nil, "-e", "flock_bin_dir="+newBin)
		r.mustSucceed(t)
		if got := r.tasks["Install flockctl in /usr/local/bin"]; got != "changed" {
			t.Errorf("task Install flockctl in /usr/local/bin: %q, want changed\n%s", got, r.out)
		}
		if got := r.tasks["Install flock-agent in /usr/local/bin"]; got != "ok" {
			t.Errorf("task Install flock-agent in /usr/local/bin: %q, want ok (same bytes)\n%s", got, r.out)
		}
		after := p.snapshot(t)
		if before["flock.service"] == after["flock.service"] {
			t.Errorf("flock.service was not restarted: %s", after["flock.service"])
		}
		for _, id := range vmAgents {
			k := unitName(id)
			if before[k] != after[k] {
				t.Errorf("%s restarted with the bus: %s -> %s", k, before[k], after[k])
			}
		}
		p.v.Eventually(t, time.Minute, func() error {
			for _, a := range p.status(t) {
				if a.State != "active" || a.Bus != "connected" {
					return fmt.Errorf("agent %d: %s, bus %s", a.ID, a.State, a.Bus)
				}
			}
			return nil
		})
		r = p.play(t, nil, "-e", "flock_bin_dir="+newBin)
		r.mustSucceed(t)
		if r.recap.Changed != 0 {
			t.Errorf("the run after the upgrade: changed=%d, want 0\n%s", r.recap.Changed, r.out)
		}
	})
}

// buildFlockBinaries builds flockctl and flock-agent for the controller
// to copy, as `make build` does.
func buildFlockBinaries(t *testing.T, flags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("build flockctl and flock-agent: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	argv := append(append([]string{"build"}, flags...), "-o", dir+"/", "./cmd/flockctl", "./cmd/flock-agent")
	out, err := runInRepo(ctx, os.Environ(), append([]string{goBin}, argv...)...)
	if err != nil {
		t.Fatalf("go %v: %v\n%s", argv, err, out)
	}
	return dir
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

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

// ansiblePlayer runs ansible/site.yml against one VM.
type ansiblePlayer struct {
	v        *harness.VM
	playbook string
	dir      string // inventory, vars, Ansible's own files
	bin      string // flock_bin_dir
	env      []string
	runs     int
}

// ansibleHost is the VM's name in the inventory.
const ansibleHost = "flockvm"

func (p *ansiblePlayer) writeInventory(t *testing.T) {
	t.Helper()
	s := p.v.SSH()
	sshArgs := "-o UserKnownHostsFile=" + s.KnownHostsFile + " -o StrictHostKeyChecking=no" +
		" -o HostKeyAlgorithms=ssh-ed25519 -o IdentitiesOnly=yes -o ConnectTimeout=30"
	// Pipelining: one ssh round trip per task instead of three, which
	// the emulated VM feels; the role does not depend on it.
	inv := fmt.Sprintf("[flock]\n%s ansible_host=%s ansible_port=%d ansible_user=%s ansible_ssh_private_key_file=%s "+
		"ansible_python_interpreter=/usr/bin/python3 ansible_pipelining=true ansible_ssh_common_args=%q\n",
		ansibleHost, s.Host, s.Port, s.User, s.KeyFile, sshArgs)
	if err := os.WriteFile(filepath.Join(p.dir, "hosts"), []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ansibleRecap is one host's line of the PLAY RECAP.
type ansibleRecap struct {
	OK, Changed, Unreachable, Failed, Skipped, Rescued, Ignored int
}

// ansibleRun is the outcome of one ansible-playbook.
type ansibleRun struct {
	out   string
	err   error
	recap ansibleRecap
	// tasks is each task's (and handler's) outcome for the host, by its
	// name without the role's prefix: ok, changed, skipping, fatal or
	// failed; absent if it did not run.
	tasks map[string]string
}

// play runs the playbook with flock_spec (the role's default if nil) and
// args, and parses what it printed.
func (p *ansiblePlayer) play(t *testing.T, flockSpec map[string]any, args ...string) ansibleRun {
	t.Helper()
	p.runs++
	vars := map[string]any{"flock_bin_dir": p.bin}
	if flockSpec != nil {
		vars["flock_spec"] = flockSpec
	}
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	varsFile := filepath.Join(p.dir, fmt.Sprintf("vars-%d.json", p.runs))
	if err := os.WriteFile(varsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{p.playbook, "-i", filepath.Join(p.dir, "hosts"), "-e", "@" + varsFile}, args...)
	argv = append(argv, "ansible/site.yml")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	out, err := runInRepo(ctx, p.env, argv...)
	t.Logf("ansible-playbook %s: %v in %v", strings.Join(args, " "), err, time.Since(t0).Round(time.Second))
	r := ansibleRun{out: out, err: err, tasks: parseTasks(out)}
	var ok bool
	if r.recap, ok = parseRecap(out, ansibleHost); !ok {
		t.Fatalf("ansible-playbook printed no PLAY RECAP for %s (%v):\n%s", ansibleHost, err, out)
	}
	return r
}

func (r ansibleRun) mustSucceed(t *testing.T) {
	t.Helper()
	if r.err != nil || r.recap.Failed != 0 || r.recap.Unreachable != 0 {
		t.Fatalf("ansible-playbook: %v, recap %+v\n%s", r.err, r.recap, r.out)
	}
}

// section is what the play printed for the task name, up to the next.
// assertTasks checks what each named task did: changed, ok, skipping...
func (r ansibleRun) assertTasks(t *testing.T, want map[string]string) {
	t.Helper()
	for task, w := range want {
		if got := r.tasks[task]; got != w {
			t.Errorf("task %q: %q, want %q\n%s", task, got, w, r.out)
		}
	}
}

func (r ansibleRun) section(name string) string {
	i := strings.Index(r.out, name+"] *")
	if i < 0 {
		return ""
	}
	s := r.out[i:]
	if j := strings.Index(s, "\nTASK ["); j >= 0 {
		s = s[:j]
	}
	if j := strings.Index(s, "\nRUNNING HANDLER ["); j >= 0 {
		s = s[:j]
	}
	if j := strings.Index(s, "\nPLAY RECAP"); j >= 0 {
		s = s[:j]
	}
	return s
}

var (
	recapRe  = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)`)
	headRe   = regexp.MustCompile(`(?m)^(?:TASK|RUNNING HANDLER) \[(?:[^\]:]+ : )?(.+?)\] \*+$`)
	resultRe = regexp.MustCompile(`^(ok|changed|skipping|fatal|failed): \[([^\]]+)\]`)
)

// parseRecap reads host's line of the PLAY RECAP.
func parseRecap(out, host string) (ansibleRecap, bool) {
	i := strings.LastIndex(out, "PLAY RECAP")
	if i < 0 {
		return ansibleRecap{}, false
	}
	for _, m := range recapRe.FindAllStringSubmatch(out[i:], -1) {
		if m[1] != host {
			continue
		}
		n := make([]int, 7)
		for k := range n {
			n[k], _ = strconv.Atoi(m[k+2])
		}
		return ansibleRecap{n[0], n[1], n[2], n[3], n[4], n[5], n[6]}, true
	}
	return ansibleRecap{}, false
}

// parseTasks reads each task's outcome from the default callback's
// output. A looped task is changed if any item is, fatal if any fails.
func parseTasks(out string) map[string]string {
	rank := map[string]int{"skipping": 1, "ok": 2, "changed": 3, "failed": 4, "fatal": 5}
	tasks := map[string]string{}
	name := ""
	for _, l := range strings.Split(out, "\n") {
		if m := headRe.FindStringSubmatch(l); m != nil {
			name = m[1]
			continue
		}
		if m := resultRe.FindStringSubmatch(l); m != nil && name != "" && m[2] != "localhost" {
			if rank[m[1]] > rank[tasks[name]] {
				tasks[name] = m[1]
			}
		}
	}
	return tasks
}

func (p *ansiblePlayer) run(t testing.TB, argv ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return p.v.Run(ctx, argv...)
}

func (p *ansiblePlayer) status(t testing.TB) []agentStatus {
	t.Helper()
	out, errOut, err := p.run(t, "flockctl", "status", "--output", "json")
	if err != nil {
		t.Fatalf("flockctl status --output json: %v\n%s%s", err, out, errOut)
	}
	var st []agentStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("flockctl status --output json: %v\n%s", err, out)
	}
	return st
}

// snapshot is what a run that changes nothing leaves as it was: the spec,
// the binaries, flockctl's view, and every unit's current run.
func (p *ansiblePlayer) snapshot(t testing.TB) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for name, argv := range map[string][]string{
		"spec":     {"sh", "-c", "ls -l --time-style=full-iso /etc/flock/flock.yaml && cat /etc/flock/flock.yaml"},
		"binaries": {"sh", "-c", "ls -l --time-style=full-iso /usr/local/bin/flockctl /usr/local/bin/flock-agent && sha256sum /usr/local/bin/flockctl /usr/local/bin/flock-agent"},
		"state":    {"sh", "-c", "cat /var/lib/flock/applied.json /etc/flock/bus.json"},
		"users":    {"sh", "-c", "getent passwd | grep ^flock"},
	} {
		out, errOut, err := p.run(t, argv...)
		snap[name] = fmt.Sprintf("%s%s err=%v", out, errOut, err)
	}
	// flockctl's view, less what moves by itself (heartbeats).
	out, errOut, err := p.run(t, "flockctl", "status", "--output", "json")
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
		out, errOut, err := p.run(t, "systemctl", "show", "-p", "ActiveState", "-p", "ActiveEnterTimestamp",
			"-p", "ActiveEnterTimestampMonotonic", "-p", "InvocationID", "-p", "MainPID", unit)
		snap[unit] = fmt.Sprintf("%s%s err=%v", out, errOut, err)
	}
	return snap
}

func (p *ansiblePlayer) assertSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, b := range before {
		if a := after[k]; a != b {
			t.Errorf("%s changed:\nbefore: %s\nafter:  %s", k, b, a)
		}
	}
}
